"""The Pulumi provider plugins the docker and kubernetes platforms need.

The pins are the installed `pulumi-docker` / `pulumi-kubernetes` packages'
(their `pulumi-plugin.json`; requirements.txt pins the packages), so one
place pins each. env.sh turns automatic plugin acquisition off, so nothing
fetches a plugin behind the user's back: `make plugins` installs them where
get.pulumi.com can be reached, and the program refuses a platform whose
plugin is missing before it creates anything, naming the plugin and the fix.

    python -m mirrorstack.platforms.provider_plugins install [docker|kubernetes ...]
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from mirrorstack import extras

PACKAGES = {platform: extras.EXTRAS[platform][0] for platform in ("docker", "kubernetes")}  # platform → provider SDK


@dataclass(frozen=True)
class Plugin:
    name: str
    version: str

    def __str__(self) -> str:
        return f"resource plugin {self.name} v{self.version}"


def pinned_plugin(platform: str) -> Plugin | None:
    """The plugin `platform` needs (None: the local platform needs none), read
    from its SDK package without importing it (pulumi_kubernetes is slow to import)."""
    package = PACKAGES.get(platform)
    if package is None:
        return None
    spec = find_spec(package)
    if spec is None:
        extras.require(platform)  # raises, naming the extra that brings the SDK
    meta = json.loads((Path(next(iter(spec.submodule_search_locations))) / "pulumi-plugin.json").read_text())
    return Plugin(meta["name"], meta["version"])


def pulumi_home(env=os.environ) -> Path:
    return Path(env.get("PULUMI_HOME") or Path.home() / ".pulumi")


def is_installed(plugin: Plugin, env=os.environ) -> bool:
    """Installed in PULUMI_HOME (complete: no `.partial` marker), or on the PATH
    (the engine uses a `pulumi-resource-<name>` binary it finds there)."""
    folder = pulumi_home(env) / "plugins" / f"resource-{plugin.name}-v{plugin.version}"
    on_path = shutil.which(f"pulumi-resource-{plugin.name}", path=env.get("PATH"))
    return (folder.is_dir() and not folder.with_name(folder.name + ".partial").exists()) or on_path is not None


def missing_plugin_problem(platform: str, env=os.environ) -> str | None:
    plugin = pinned_plugin(platform)
    if plugin is None or is_installed(plugin, env):
        return None
    return (f"platform: {platform} needs the Pulumi {plugin}, which is not installed in "
            f"{pulumi_home(env) / 'plugins'} (automatic plugin downloads are off); "
            f"fix: run `make plugins` on a machine that reaches get.pulumi.com")


def install(platforms: list[str], env=os.environ) -> list[str]:
    """`pulumi plugin install` each platform's pinned plugin; the problems, one
    per plugin that could not be installed, with the reason the CLI gave."""
    problems = []
    for platform in platforms:
        plugin = pinned_plugin(platform)
        if plugin is None or is_installed(plugin, env):
            continue
        print(f"plugins: installing the {plugin} (for platform: {platform})", flush=True)
        done = subprocess.run(["pulumi", "plugin", "install", "resource", plugin.name, plugin.version],
                              env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not is_installed(plugin, env):
            problems.append(f"{plugin} (platform: {platform}) could not be installed: {_reason(done.stderr)}")
    return problems


def _reason(stderr: str) -> str:
    """The CLI's error, and the first download error behind it (e.g. no such host)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    causes = [line.removeprefix("warning: ") for line in lines if "Error downloading plugin" in line]
    return "; ".join([*(errors[-1:] or lines[-1:]), *causes[:1]]) or "no output"


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "install" or any(p not in PACKAGES for p in argv[1:]):
        print(f"usage: python -m mirrorstack.platforms.provider_plugins install [{'|'.join(PACKAGES)} ...]", file=sys.stderr)
        return 2
    return report(install(argv[1:] or list(PACKAGES)))


def report(problems: list[str]) -> int:
    """Each problem on stderr, or where the plugins are; the exit code."""
    for problem in problems:
        print(f"plugins: {problem}", file=sys.stderr)
    if not problems:
        print(f"plugins: installed in {pulumi_home() / 'plugins'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
