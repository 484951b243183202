"""The one builder of a Kafka service's java command lines (every platform runs
what it returns): `{dir}`, the tools' lines, the JMX agent and the files."""
from __future__ import annotations

import pytest

from mirrorstack.platforms import jvm
from mirrorstack.platforms.java_service import JavaRuntime, java_service

RULES = "rules:\n- pattern: kafka.server<type=(.+)><>Value\n"  # a JMX exporter config
RUNTIME = JavaRuntime(java="/j/bin/java", kafka_libs="/k/libs", jmx_agent="/a/agent.jar")


def build(**extra):
    return java_service(RUNTIME, folder="/srv/b0", main=jvm.BROKER_MAIN, args=["{dir}/server.properties"],
                        files={"server.properties": "x=1\n"}, heap="1g", **extra)


def test_the_service_line_is_java_options_classpath_main_args():
    spec = build(jvm_options=["-Dlogin={dir}/jaas.conf"])
    assert spec.argv == ["/j/bin/java", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                         "-Dlog4j2.configurationFile=/srv/b0/log4j2.properties", "-Dlogin=/srv/b0/jaas.conf",
                         "-cp", "/k/libs/*", "kafka.Kafka", "/srv/b0/server.properties"]
    assert list(spec.files) == ["log4j2.properties", "server.properties"]
    assert (spec.prepare, spec.after_start) == ([], [])


def test_tools_are_short_lived_without_the_agent_or_the_services_options():
    spec = build(prepare=[(jvm.STORAGE_TOOL_MAIN, ["format", "-c", "{dir}/server.properties"])],
                 after_start=[(jvm.CONFIG_COMMAND_MAIN, ["--command-config", "{dir}/admin.properties"])],
                 jvm_options=["-Dlogin={dir}/jaas.conf"], metrics=("0.0.0.0", 9404, RULES))
    (prepare,), (after,) = spec.prepare, spec.after_start
    assert prepare[:4] == ["/j/bin/java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
    assert prepare[-3:] == ["format", "-c", "/srv/b0/server.properties"]
    assert after[-3:] == [jvm.CONFIG_COMMAND_MAIN, "--command-config", "/srv/b0/admin.properties"]
    for tool in (prepare, after):  # the agent's port is the service's; its options are its own
        assert not any(a.startswith(("-javaagent:", "-Dlogin=")) for a in tool)
    assert "-javaagent:/a/agent.jar=0.0.0.0:9404:/srv/b0/jmx-exporter.yaml" in spec.argv
    assert spec.files["jmx-exporter.yaml"] == RULES  # the rules the caller chose


def test_metrics_without_an_agent_jar_is_refused():
    with pytest.raises(ValueError, match="JMX exporter agent"):
        java_service(JavaRuntime(java="java", kafka_libs="/k"), folder="/f", main="M", args=[], files={},
                     heap="1g", metrics=("0.0.0.0", 9404, RULES))


def test_the_users_jvm_options_come_last_so_they_win_and_only_on_the_service():
    spec = build(user_jvm_options=["-XX:TieredStopAtLevel=1", "-Xss1m"],
                 prepare=[(jvm.STORAGE_TOOL_MAIN, ["format"])])
    assert spec.argv[spec.argv.index("-cp") - 2:spec.argv.index("-cp")] == ["-XX:TieredStopAtLevel=1", "-Xss1m"]
    assert "-XX:+UseG1GC" in spec.argv
    assert not any(a in ("-XX:TieredStopAtLevel=1", "-Xss1m") for a in spec.prepare[0][:2] + spec.prepare[0][4:])


def test_a_collector_among_the_users_options_replaces_g1():
    # the JVM refuses to start with two collectors ("Multiple garbage collectors selected")
    spec = build(user_jvm_options=["-XX:+UseParallelGC"])
    assert "-XX:+UseG1GC" not in spec.argv and "-XX:+UseParallelGC" in spec.argv
    assert "-XX:+UseG1GC" in build(user_jvm_options=["-XX:+UseStringDeduplication"]).argv
