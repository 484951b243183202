"""`make plugins`: the docker and kubernetes provider plugins, pinned by the
installed SDK packages. Each is downloaded from get.pulumi.com
(mirrorstack.platforms.provider_plugins.install); where that cannot be
reached, the kubernetes one is built from the Go module proxy
(tools/build-kube-provider.sh: the provider module's commit that release was
tagged from, stamped with the release, cached outside the checkout) and
installed from the file. The docker provider has no such source here: it is
reported missing with the reason."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mirrorstack import versions
from mirrorstack.platforms import provider_plugins
from tools.kube import layout

BUILD_SCRIPT = Path(__file__).with_name("build-kube-provider.sh")


def build_kubernetes(env=os.environ) -> tuple[str | None, str | None]:
    """Build the pinned kubernetes provider (cached): (its binary, None) or (None, the problem)."""
    plugin = provider_plugins.pinned_plugin("kubernetes")
    built = subprocess.run([str(BUILD_SCRIPT), str(layout.CACHE), plugin.version, versions.kubernetes_provider_module()],
                           env=env, stdout=subprocess.PIPE, text=True)  # progress goes to our stderr
    if built.returncode != 0:
        return None, f"{plugin} could not be built from the Go module proxy (exit {built.returncode}, see above)"
    return built.stdout.strip().splitlines()[-1], None


def build_and_install_kubernetes(env=os.environ) -> str | None:
    """Build the pinned kubernetes provider and install it as a plugin; a problem or None."""
    plugin = provider_plugins.pinned_plugin("kubernetes")
    binary, problem = build_kubernetes(env)
    if problem:
        return problem
    done = subprocess.run(["pulumi", "plugin", "install", "resource", plugin.name, plugin.version, "--file", binary],
                          env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not provider_plugins.is_installed(plugin, env):
        return f"{plugin} built as {binary} but not installed: {done.stderr.strip()}"
    print(f"plugins: installed the {plugin} built from Go modules ({binary})", flush=True)
    return None


def main(argv: list[str] | None = None) -> int:
    if (argv if argv is not None else sys.argv[1:]) == ["--build-kubernetes"]:
        # `make kube` (so `make test`): the suite's cluster tests run the provider from the cache, uninstalled
        binary, problem = build_kubernetes()
        print(f"plugins: {problem}" if problem else f"plugins: kubernetes provider built: {binary}", file=sys.stderr)
        return 1 if problem else 0
    problems = []
    for platform in provider_plugins.PACKAGES:
        failed = provider_plugins.install([platform])
        if failed and platform == "kubernetes":
            print(f"plugins: {failed[0]}; building it instead", file=sys.stderr, flush=True)
            failed = [p for p in [build_and_install_kubernetes()] if p]
        problems += failed
    return provider_plugins.report(problems)


if __name__ == "__main__":
    sys.exit(main())
