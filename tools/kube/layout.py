"""Where the cluster keeps things, its addresses and its binaries.

Everything of one cluster lives under DATA (etcd, containerd's root, the
kubelet's root, certificates, logs) and RUN (sockets, pid files); the
binaries come from `make kube`'s cache, outside any checkout. Pods live on
BRIDGE, a bridge this tool makes, in POD_CIDR; the API server binds the
bridge's gateway address (pods reach it there through the `kubernetes`
Service), everything else binds 127.0.0.1.
"""
from __future__ import annotations

import os
from pathlib import Path

from mirrorstack.versions import kube_versions

DATA = Path(os.environ.get("MIRRORSTACK_KUBE_DATA", "/var/lib/mirrorstack-kube"))
RUN = Path(os.environ.get("MIRRORSTACK_KUBE_RUN", "/run/mirrorstack-kube"))
CACHE = Path(os.environ.get("MIRRORSTACK_CACHE") or Path.home() / ".cache" / "mirrorstack")

NODE = "mirrorstack-kube"
ZONE = "zone-a"  # the node's topology.kubernetes.io/zone (broker.rack comes from it)
BRIDGE = "msk-kube0"
POD_CIDR = "10.244.0.0/24"
GATEWAY = "10.244.0.1"  # the host on the pods' bridge: the API server and the kubelet listen here
SERVICE_CIDR = "10.96.0.0/24"
API_SERVICE_IP = "10.96.0.1"
DNS_SERVICE_IP = "10.96.0.10"
API_PORT = 6443  # on GATEWAY, where nothing else of ours listens
# What binds 127.0.0.1, kept out of the ports stacks hash into (their ranges run 5000-29999,
# tests.support.ports.STACK_PORTS; a stack's default base is 10000 or above) and out of the
# kernel's ephemeral ones: at Kubernetes' defaults (10248-10259, etcd here at 23790/23800) a
# stack of 127.0.0.1 services given such a range could meet them while the cluster runs.
ETCD_CLIENT_PORT, ETCD_PEER_PORT = 4941, 4942
KUBELET_HEALTHZ_PORT = 4943
PROXY_HEALTHZ_PORT, PROXY_METRICS_PORT = 4944, 4945
CONTROLLER_MANAGER_PORT = 4946
SCHEDULER_PORT = 4947
LOOPBACK_PORTS = (ETCD_CLIENT_PORT, ETCD_PEER_PORT, KUBELET_HEALTHZ_PORT, PROXY_HEALTHZ_PORT, PROXY_METRICS_PORT,
                  CONTROLLER_MANAGER_PORT, SCHEDULER_PORT)
ETCD_CLIENT = f"127.0.0.1:{ETCD_CLIENT_PORT}"
ETCD_PEER = f"127.0.0.1:{ETCD_PEER_PORT}"
PAUSE_IMAGE = "registry.k8s.io/pause:mirrorstack"
COREDNS_IMAGE_REPO = "mirrorstack/coredns"


def bin_dir() -> Path:
    """What `make kube` (tools/build-kube.sh) built, keyed by the versions."""
    v = kube_versions()
    return CACHE / f"kube-{v['kubernetes']}-etcd-{v['etcd']}-coredns-{v['coredns']}"


def binary(name: str) -> str:
    path = bin_dir() / name
    if not path.exists():
        raise SystemExit(f"kube: {path} is missing: run `make kube` (builds the cluster's pieces, ~25 min once)")
    return str(path)


def coredns_image() -> str:
    return f"{COREDNS_IMAGE_REPO}:{kube_versions()['coredns']}"


def local_path_binary() -> str:
    return f"local-path-provisioner-{kube_versions()['local-path-provisioner']}"


def local_path_image() -> str:
    return f"mirrorstack/local-path-provisioner:{kube_versions()['local-path-provisioner']}"


HELPER_IMAGE = "mirrorstack/busybox:debian"
STORAGE_CLASS = "local-path"  # the cluster's default: a folder under VOLUMES per volume
VOLUMES = DATA / "volumes"


PKI = DATA / "pki"
KUBECONFIG = DATA / "admin.kubeconfig"
LOGS = DATA / "logs"
CONTAINERD_SOCKET = RUN / "containerd" / "containerd.sock"
HOST_STATE = DATA / "host-state.json"  # what start changed on the host, read back by stop
