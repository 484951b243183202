"""The provider plugins through the real Pulumi CLI: `make plugins` installs
them or fails naming each plugin and the reason, and a stack on a platform
whose plugin is missing is refused before any resource exists."""
import json
import subprocess
import sys

import pytest

from mirrorstack.platforms.provider_plugins import pinned_plugin
from tests.support.pulumi_cli import engine_env
from tests.support.stacks import REPO, stack_project

pytestmark = pytest.mark.integration


def test_installing_the_plugins_succeeds_or_names_each_plugin_and_reason(tmp_path):
    env = engine_env(tmp_path)
    done = subprocess.run([sys.executable, "-m", "mirrorstack.platforms.provider_plugins", "install"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    for platform in ("docker", "kubernetes"):
        plugin = pinned_plugin(platform)
        folder = tmp_path / "home" / "plugins" / f"resource-{plugin.name}-v{plugin.version}"
        if done.returncode == 0:  # a machine that reaches get.pulumi.com
            assert folder.is_dir(), done.stdout
        else:  # here: no route to get.pulumi.com
            assert f"plugins: {plugin} (platform: {platform}) could not be installed: error:" in done.stderr, done.stderr
            assert "get.pulumi.com" in done.stderr and not folder.exists()
    assert done.returncode in (0, 1), done.stderr


def test_a_platform_without_its_plugin_is_refused_before_any_resource(tmp_path):
    topology = {"platform": "docker", "clusters": {"us": {}, "central": {}},
                "flows": [{"source": "us", "target": "central"}]}
    with stack_project("aggregation", tmp_path, topology=topology) as project:
        up = project.run("up", "--yes", "--skip-preview", check=False, timeout=600)
        output = up.stdout + up.stderr
        assert up.returncode != 0, output
        plugin = pinned_plugin("docker")
        assert f"platform: docker needs the Pulumi {plugin}" in output and "fix: run `make plugins`" in output, output
        assert "Traceback" not in output, output
        deployment = json.loads(project.run("stack", "export").stdout)["deployment"]
        assert [r["type"] for r in deployment.get("resources") or []] == ["pulumi:pulumi:Stack"]
