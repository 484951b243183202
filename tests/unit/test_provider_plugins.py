"""The docker/kubernetes provider plugins: their pins, the check that refuses a
platform whose plugin is missing, and the reason `make plugins` reports."""
from __future__ import annotations

from importlib import metadata

from mirrorstack.platforms import provider_plugins as plugins

# What `pulumi plugin install` printed here, where get.pulumi.com cannot be resolved.
OFFLINE_STDERR = """\
warning: Error downloading plugin: Get "https://get.pulumi.com/releases/plugins/pulumi-resource-docker-v5.2.0-linux-amd64.tar.gz": dial tcp: lookup get.pulumi.com on 10.255.255.53:53: no such host
Will retry in 640ms [4/5]
error: [resource plugin docker-5.2.0] downloading from : failed to download plugin: docker-5.2.0: failed all 5 attempts
"""


def test_the_pins_are_the_installed_sdk_packages():
    assert plugins.pinned_plugin("docker") == plugins.Plugin("docker", metadata.version("pulumi-docker"))
    assert plugins.pinned_plugin("kubernetes") == plugins.Plugin("kubernetes", metadata.version("pulumi-kubernetes"))
    assert plugins.pinned_plugin("local") is None


def test_a_missing_plugin_is_named_with_the_fix(tmp_path):
    env = {"PULUMI_HOME": str(tmp_path), "PATH": str(tmp_path / "bin")}
    problem = plugins.missing_plugin_problem("docker", env)
    version = metadata.version("pulumi-docker")
    assert problem.startswith(f"platform: docker needs the Pulumi resource plugin docker v{version}")
    assert str(tmp_path / "plugins") in problem and "fix: run `make plugins`" in problem
    assert plugins.missing_plugin_problem("local", env) is None


def test_an_installed_plugin_passes_but_a_partial_download_does_not(tmp_path):
    env = {"PULUMI_HOME": str(tmp_path), "PATH": str(tmp_path / "bin")}
    folder = tmp_path / "plugins" / f"resource-kubernetes-v{metadata.version('pulumi-kubernetes')}"
    folder.mkdir(parents=True)
    folder.with_name(folder.name + ".partial").touch()
    assert plugins.missing_plugin_problem("kubernetes", env) is not None
    folder.with_name(folder.name + ".partial").unlink()
    assert plugins.missing_plugin_problem("kubernetes", env) is None


def test_a_plugin_on_the_path_counts_as_installed(tmp_path):
    binary = tmp_path / "bin" / "pulumi-resource-docker"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert plugins.missing_plugin_problem("docker", {"PULUMI_HOME": str(tmp_path), "PATH": str(binary.parent)}) is None


def test_the_reason_is_the_cli_error_and_the_download_error_behind_it():
    reason = plugins._reason(OFFLINE_STDERR)
    assert reason.startswith("error: [resource plugin docker-5.2.0]")
    assert "lookup get.pulumi.com" in reason and "no such host" in reason
    assert plugins._reason("") == "no output"


def test_the_command_line_refuses_an_unknown_platform(capsys):
    assert plugins.main(["install", "nomad"]) == 2
    assert "usage:" in capsys.readouterr().err
