"""tools.kube_cluster on this machine: a real single-node cluster (API server
with RBAC, kubelet, containerd, kube-proxy, CoreDNS) starts from `make kube`'s
pieces, runs a pod from an imported image that resolves a Service by name,
and `stop` leaves the host's sysctls and iptables exactly as they were."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.support.stacks import REPO
from tools.kube import host_state, layout

pytestmark = pytest.mark.integration


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


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "tools.kube_cluster", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"kube_cluster {' '.join(args)}: {done.stdout}\n{done.stderr}"
    return done


def kubectl(*args: str, stdin: str | None = None, expect: int = 0) -> str:
    done = subprocess.run([layout.binary("kubectl"), f"--kubeconfig={layout.KUBECONFIG}", *args], input=stdin,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == expect, f"kubectl {' '.join(args)}: {done.stdout} {done.stderr}"
    return done.stdout


def test_a_cluster_starts_runs_a_pod_and_stop_puts_the_host_back():
    if any(json.loads(cli("status").stdout)["pieces"].values()):
        pytest.fail("a cluster of tools.kube_cluster already runs: this test starts and stops its own")
    first, second = host(), (time.sleep(1), host())[1]
    volatile = {k for k in first["sysctls"].keys() | second["sysctls"].keys()
                if first["sysctls"].get(k) != second["sysctls"].get(k)}
    try:
        started = cli("start", "--images")
        assert started.stdout.strip().splitlines()[-1] == str(layout.KUBECONFIG)
        again = cli("start", "--images")  # idempotent: the same cluster, at once
        assert "starting" not in again.stdout
        node = json.loads(kubectl("get", "node", layout.NODE, "-o", "json"))
        assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == layout.ZONE
        # RBAC, not AlwaysAllow: a service account has no rights it was not given
        assert kubectl("auth", "can-i", "create", "pods", "--as", "system:serviceaccount:default:default",
                       expect=1).strip() == "no"
        assert kubectl("auth", "can-i", "create", "pods").strip() == "yes"  # the admin
        kubectl("run", "probe", "--image", layout.coredns_image(), "--image-pull-policy", "Never", "--restart", "Never",
                "--command", "--", "/coredns", "-version")
        kubectl("wait", "pod/probe", "--for", "jsonpath={.status.phase}=Succeeded", "--timeout", "120s")
        assert "CoreDNS" in kubectl("logs", "probe")
    finally:
        stopped = subprocess.run([sys.executable, "-m", "tools.kube_cluster", "stop", "--purge"], cwd=REPO,
                                 capture_output=True, text=True, timeout=300)
    assert stopped.returncode == 0, stopped.stderr
    after = host()
    changed = {k: (first["sysctls"].get(k), after["sysctls"].get(k)) for k in first["sysctls"].keys() | after["sysctls"].keys()
               if k not in volatile and first["sysctls"].get(k) != after["sysctls"].get(k)}
    assert changed == {}, "\n".join(f"{k}: {a} -> {b}" for k, (a, b) in sorted(changed.items()))
    assert after["iptables"] == first["iptables"]
    assert after["netns"] == first["netns"] and after["bridge"] == first["bridge"]
    assert not layout.RUN.exists()
