"""A private single-node Kubernetes cluster for the kubernetes platform's tests
and for users who want to try it: etcd, the API server (RBAC and the Node
authorizer), controller-manager, scheduler, containerd (its own socket and
root), kubelet, kube-proxy and CoreDNS, from `make kube`'s cache; `make
images`' images imported into it.

    python -m tools.kube_cluster start [--images [IMAGE ...] | --no-images]   prints the kubeconfig path; idempotent
    python -m tools.kube_cluster status
    python -m tools.kube_cluster stop [--purge]      stops only what start started and puts
                                                     the host back (tools/kube/host_state.py)

Root is needed (containerd, kubelet, iptables). The host's sysctls that a
kubelet rewrites are recorded before the first start and restored by stop.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tools.kube import configs, host_state, images, layout, pki

# Started in this order, stopped in the reverse one.
PIECES = ("containerd", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy")
PIDS = layout.RUN / "pids"


_ARGV = {
    "containerd": lambda: ["containerd", "--config", str(layout.DATA / "containerd.toml")],
    "etcd": configs.etcd_argv, "kube-apiserver": configs.apiserver_argv,
    "kube-controller-manager": configs.controller_manager_argv, "kube-scheduler": configs.scheduler_argv,
    "kubelet": configs.kubelet_argv, "kube-proxy": configs.proxy_argv,
}


def _argv(piece: str) -> list[str]:
    return _ARGV[piece]()


def _pid(piece: str) -> int | None:
    """The piece's pid when this tool started it and it still runs: the pid
    file's process runs the piece's binary (not a reused pid, not a zombie)."""
    try:
        pid = int((PIDS / f"{piece}.pid").read_text())
        running = os.path.realpath(os.readlink(f"/proc/{pid}/exe"))
    except (OSError, ValueError):
        return None
    program = _argv(piece)[0]
    return pid if running == os.path.realpath(shutil.which(program) or program) else None


def _start(piece: str) -> None:
    if _pid(piece):
        return
    layout.LOGS.mkdir(parents=True, exist_ok=True)
    PIDS.mkdir(parents=True, exist_ok=True)
    with open(layout.LOGS / f"{piece}.log", "ab") as log:
        proc = subprocess.Popen(_argv(piece), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=layout.DATA)
    (PIDS / f"{piece}.pid").write_text(str(proc.pid))


def _wait(what: str, check, timeout: float, piece: str) -> None:
    """Until `check()` is true; fails with the piece's log tail when it died or took too long."""
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    while not check():
        if not _pid(piece):
            raise SystemExit(f"kube: {piece} exited while waiting for {what}:\n{_tail(piece)}")
        if time.monotonic() > deadline:
            raise SystemExit(f"kube: {what} not within {timeout:.0f} s:\n{_tail(piece)}")
        if time.monotonic() - last > 15:
            print(f"kube: waiting for {what}", flush=True)
            last = time.monotonic()
        time.sleep(0.5)


def _tail(piece: str, lines: int = 15) -> str:
    try:
        return "\n".join((layout.LOGS / f"{piece}.log").read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _https_ok(url: str) -> bool:
    context = ssl.create_default_context(cafile=str(layout.PKI / "ca.crt"))
    context.load_cert_chain(str(layout.PKI / "admin.crt"), str(layout.PKI / "admin.key"))
    try:
        with urllib.request.urlopen(url, context=context, timeout=3) as response:
            return response.status == 200
    except OSError:
        return False


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return response.status == 200
    except OSError:
        return False


def kubectl(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([layout.binary("kubectl"), f"--kubeconfig={layout.KUBECONFIG}", *args],
                          input=stdin, capture_output=True, text=True, timeout=120)
    if check and done.returncode != 0:
        raise SystemExit(f"kube: kubectl {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return done


def _node_ready() -> bool:
    done = kubectl("get", "node", layout.NODE, "-o", "json", check=False)
    if done.returncode != 0:
        return False
    conditions = json.loads(done.stdout)["status"].get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def api_url() -> str:
    return f"https://{layout.GATEWAY}:{layout.API_PORT}"


def healthy() -> bool:
    return all(_pid(p) for p in PIECES) and _https_ok(f"{api_url()}/readyz") and _node_ready()


def _preflight() -> None:
    if os.geteuid() != 0:
        raise SystemExit("kube: root is needed (containerd, kubelet, iptables)")
    for tool in ("containerd", "runc", "ctr", "iptables", "ip"):
        if not shutil.which(tool):
            raise SystemExit(f"kube: {tool} not found: run `make kube` (installs Debian's containerd, runc, CNI plugins)")
    if not Path("/usr/lib/cni/bridge").exists():
        raise SystemExit("kube: CNI plugins missing (/usr/lib/cni/bridge): run `make kube`")
    for name in (*PIECES[1:], "kubectl", "coredns", "pause", layout.local_path_binary()):
        layout.binary(name)  # fails naming `make kube`


def _write_configs() -> None:
    layout.DATA.mkdir(parents=True, exist_ok=True)
    (layout.DATA / "containerd.toml").write_text(configs.containerd_config())
    (layout.DATA / "cni" / "net.d").mkdir(parents=True, exist_ok=True)
    (layout.DATA / "cni" / "net.d" / "10-mirrorstack.conflist").write_text(configs.cni_config())
    (layout.DATA / "kubelet-config.json").write_text(configs.kubelet_config())
    (layout.DATA / "kube-proxy.json").write_text(configs.proxy_config())
    # Pods resolve cluster names only: nothing is forwarded off the machine.
    (layout.DATA / "kubelet-resolv.conf").write_text("nameserver 127.0.0.1\n")


def start(docker_images: list[str]) -> Path:
    _preflight()
    started = time.monotonic()
    if not healthy():
        _start_pieces()
    _add_ons()
    images.import_from_docker(docker_images)
    print(f"kube: ready in {time.monotonic() - started:.0f} s", flush=True)
    return layout.KUBECONFIG


def _start_pieces() -> None:
    if not host_state.bridge_exists():
        host_state.check_addresses_free()
    state = host_state.record()
    state.setdefault("netns_before", sorted(os.listdir("/var/run/netns")) if Path("/var/run/netns").exists() else [])
    layout.HOST_STATE.write_text(json.dumps(state, indent=2))
    host_state.prepare(state)
    pki.ensure()
    _write_configs()
    print(f"kube: starting a single-node cluster (Kubernetes {layout.kube_versions()['kubernetes']}) in {layout.DATA}",
          flush=True)
    _start("containerd")
    _wait("containerd", layout.CONTAINERD_SOCKET.exists, 60, "containerd")
    _start("etcd")
    _wait("etcd", lambda: _http_ok(f"http://{layout.ETCD_CLIENT}/health"), 60, "etcd")
    _start("kube-apiserver")
    _wait("the API server", lambda: _https_ok(f"{api_url()}/readyz"), 120, "kube-apiserver")
    for piece in ("kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"):
        _start(piece)
    _wait(f"node {layout.NODE} Ready", _node_ready, 120, "kubelet")


def _add_ons() -> None:
    """The cluster's own images, CoreDNS and the default StorageClass (applied
    every start: kubectl apply changes only what differs)."""
    images.import_own()
    layout.VOLUMES.mkdir(parents=True, exist_ok=True)
    kubectl("apply", "-f", "-", stdin=configs.coredns_manifests())
    kubectl("apply", "-f", "-", stdin=configs.local_path_manifests())
    kubectl("-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=180s")
    kubectl("-n", "local-path-storage", "rollout", "status", "deployment/local-path-provisioner", "--timeout=180s")


def _stop_piece(piece: str, grace: float = 20) -> None:
    pid = _pid(piece)
    if pid:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _pid(piece) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _pid(piece):
            os.kill(pid, signal.SIGKILL)
            while _pid(piece):
                time.sleep(0.1)
    (PIDS / f"{piece}.pid").unlink(missing_ok=True)


def _remove_containers() -> None:
    """Every container of the cluster's containerd, killed and removed (the
    kubelet is stopped first, so nothing restarts them)."""
    if not _pid("containerd"):
        return
    tasks = images.ctr("tasks", "list", "--quiet", check=False).stdout.decode().split()
    for task in tasks:
        images.ctr("tasks", "kill", "--signal", "SIGKILL", task, check=False)
    deadline = time.monotonic() + 30
    for task in tasks:
        while images.ctr("tasks", "delete", task, check=False).returncode != 0 and time.monotonic() < deadline:
            time.sleep(0.5)
    for container in images.ctr("containers", "list", "--quiet", check=False).stdout.decode().split():
        images.ctr("containers", "delete", container, check=False)


def stop(purge: bool) -> list[str]:
    """Stop what start started, put the host back; the problems left, named."""
    for piece in ("kube-proxy", "kubelet", "kube-scheduler", "kube-controller-manager"):
        _stop_piece(piece)
    _remove_containers()
    _stop_piece("containerd")
    _stop_piece("kube-apiserver")
    _stop_piece("etcd")
    problems = host_state.unmount_under(layout.DATA, layout.RUN)
    if layout.HOST_STATE.exists():
        state = json.loads(layout.HOST_STATE.read_text())
        if Path("/var/run/netns").exists():
            host_state.remove_pod_netns([n for n in os.listdir("/var/run/netns")
                                         if n.startswith("cni-") and n not in state.get("netns_before", [])])
        problems += host_state.remove_pod_cgroups()
        if (layout.bin_dir() / "kube-proxy").exists():
            subprocess.run([str(layout.bin_dir() / "kube-proxy"), "--cleanup"], capture_output=True)
        problems += host_state.remove_kube_chains(state.get("chains", {}))
        problems += host_state.restore(state)
        if not problems:
            layout.HOST_STATE.unlink()
    if purge and not problems:
        shutil.rmtree(layout.DATA, ignore_errors=True)
    shutil.rmtree(layout.RUN, ignore_errors=True)
    return problems


def status() -> dict:
    return {"pieces": {p: _pid(p) for p in PIECES}, "api": api_url(),
            "ready": healthy() if layout.KUBECONFIG.exists() else False, "kubeconfig": str(layout.KUBECONFIG)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.kube_cluster", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("start")
    up.add_argument("--images", nargs="*", default=None,
                    help="Docker images to import (default, and --images alone: make images' images)")
    up.add_argument("--no-images", action="store_true", help="import no image (the cluster's own ones only)")
    down = sub.add_parser("stop")
    down.add_argument("--purge", action="store_true", help="also delete the cluster's data (etcd, images)")
    sub.add_parser("status")
    args = parser.parse_args(argv)
    if args.command == "start":
        if args.no_images:
            args.images = []
        elif not args.images:
            from mirrorstack import versions
            args.images = [versions.mirrorstack_image(k) for k in ("kafka", "spark", "prometheus")]
        print(start(args.images))
        return 0
    if args.command == "stop":
        problems = stop(args.purge)
        for problem in problems:
            print(f"kube: {problem}", file=sys.stderr)
        print("kube: stopped" + ("" if not problems else " with problems"))
        return 1 if problems else 0
    print(json.dumps(status(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
