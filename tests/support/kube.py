"""The private cluster of tools.kube_cluster as tests use it: kubectl, the
engine's environment for `platform: kubernetes` (kubeconfig, kubectl, the
provider built by `make plugins` as an ambient plugin: each test has its own
PULUMI_HOME), and the host state the cluster must leave as it found it."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from mirrorstack.platforms import provider_plugins
from tests.support.stacks import REPO
from tools.kube import host_state, layout

# Counters of the kernel's own activity, not settings: they move whatever runs.
COUNTERS = ("fs.file-nr", "fs.inode-nr", "fs.inode-state", "fs.dentry-state", "fs.quota.", "fs.aio-nr",
            "net.netfilter.nf_conntrack_count", "kernel.random.", "kernel.ns_last_pid", "kernel.pty.nr")


def sysctls() -> dict[str, str]:
    out = subprocess.run(["sysctl", "-a"], capture_output=True, text=True).stdout
    return {k: v for k, v in (line.split(" = ", 1) for line in out.splitlines() if " = " in line)
            if not k.startswith(COUNTERS)}


def host() -> dict:
    """The host as the cluster may change it: sysctls and iptables rules, Docker's own
    chains left out (another module's containers may come and go meanwhile)."""
    rules = {table: [r for r in lines if "DOCKER" not in r and "docker" not in r and " br-" not in r]
             for table, lines in host_state.iptables_rules().items()}
    netns = sorted(os.listdir("/var/run/netns")) if os.path.isdir("/var/run/netns") else []
    return {"sysctls": sysctls(), "iptables": rules, "netns": [n for n in netns if n.startswith("cni-")],
            "bridge": host_state.bridge_exists()}


def cluster_cli(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "tools.kube_cluster", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)
    assert not check or done.returncode == 0, f"kube_cluster {' '.join(args)}: {done.stdout}\n{done.stderr}"
    return done


def running() -> bool:
    return any(json.loads(cluster_cli("status").stdout)["pieces"].values())


def kubectl(*args: str, stdin: str | None = None, expect: int | None = 0, timeout: float = 180) -> str:
    done = subprocess.run([layout.binary("kubectl"), f"--kubeconfig={layout.KUBECONFIG}", *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout)
    assert expect is None or done.returncode == expect, f"kubectl {' '.join(args)}: {done.stdout} {done.stderr}"
    return done.stdout


def provider_dir() -> str:
    """Where `make plugins` left the kubernetes provider it built (tools/build-kube-provider.sh)."""
    version = provider_plugins.pinned_plugin("kubernetes").version
    path = layout.CACHE / f"kubernetes-provider-{version}"
    assert (path / "pulumi-resource-kubernetes").exists(), f"no kubernetes provider in {path}: run `make plugins`"
    return str(path)


def engine_env(env: dict[str, str]) -> dict[str, str]:
    """An engine environment (tests.support.pulumi_cli.engine_env) that deploys onto the cluster."""
    path = os.pathsep.join([provider_dir(), os.path.dirname(layout.binary("kubectl")), env["PATH"]])
    return {**env, "KUBECONFIG": str(layout.KUBECONFIG), "PATH": path}
