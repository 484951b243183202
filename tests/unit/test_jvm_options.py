"""`mirrorstack:jvmOptions`: extra options of every service JVM on the local
platform (the tests start theirs with C1 only), refused when not options."""
from __future__ import annotations

import pytest

from components.platforms import service_jvm_options
from components.platforms.local.platform import LocalPlatform
from tests.support.pulumi_mocks import DYNAMIC, deploy, stack_topology, unwrap_secrets

OPTIONS = "-XX:TieredStopAtLevel=1  -Xss1m"


def test_options_are_split_on_whitespace_and_none_means_none():
    assert service_jvm_options(OPTIONS) == ["-XX:TieredStopAtLevel=1", "-Xss1m"]
    assert service_jvm_options(None) == [] == service_jvm_options("  ")


def test_a_word_that_is_not_an_option_is_refused_naming_the_key_and_the_fix():
    with pytest.raises(ValueError, match=r"mirrorstack:jvmOptions: 'TieredStopAtLevel=1' is not a JVM option; "
                                         r"fix: options starting with '-'"):
        service_jvm_options("-Xss1m TieredStopAtLevel=1")


def test_every_service_jvm_gets_the_options_before_its_main_class_and_no_tool_does(tmp_path):
    mocks, _ = deploy(lambda: LocalPlatform("aggregation", str(tmp_path), jvm_options=service_jvm_options(OPTIONS)),
                      stack_topology("aggregation"), "aggregation")
    services = {name: unwrap_secrets(inputs) for name, inputs in mocks.of_type(DYNAMIC).items()
                if "argv" in inputs}
    assert {"us-broker-0", "us-controller", "connect-central-0"} <= set(services)
    for name, inputs in services.items():
        argv = inputs["argv"]
        assert argv[0].endswith("java") and argv.index("-Xss1m") < argv.index("-cp"), (name, argv)
        assert "-XX:TieredStopAtLevel=1" in argv[:argv.index("-cp")], (name, argv)
        for tool in [*(inputs.get("prepare") or []), *(inputs.get("after_start") or [])]:
            assert "-Xss1m" not in tool, (name, tool)
