"""The kubernetes platform's manifests that need nothing but their inputs:
labels, placement, data claims, the NetworkPolicy, secret keys and the fixed
names and paths every pod shares. platform.py assembles them into objects;
tests validate them with kubernetes-validate."""
from __future__ import annotations

import re

from mirrorstack.model.kubernetes import KubernetesNetworkPolicy
from mirrorstack.platforms.descriptions import POD_IP_ENV, POD_NAME_ENV
from mirrorstack.platforms.base import ServiceGroup
from mirrorstack.platforms.containers import IMAGE_DATA_DIR, IMAGE_KAFKA_UID, dns_label

KUBERNETES_VERSION = "1.30"  # the oldest Kubernetes the manifests are checked against
DATA_MOUNT = IMAGE_DATA_DIR
# Kafka's log dir is a subfolder: a fresh volume's root may hold `lost+found`,
# which Kafka would take for a broken partition folder.
DATA_DIR = f"{DATA_MOUNT}/kafka"
APPUSER = IMAGE_KAFKA_UID  # the image's user; fsGroup makes the volume writable for it
SECRET_MODE = 0o400  # kubelet adds group read for the pod's fsGroup
SECRETS_DIR = "secrets"  # a service's secret files: `<folder>/secrets/<name>`
NODE_IP_ENV = "HOST_IP"  # the address of the node a pod runs on (downward API status.hostIP)
ZONE_ENV = "NODE_ZONE"  # the zone label of that node, copied onto the pod when it is bound (see rack())
ZONE_LABEL = "topology.kubernetes.io/zone"
NETWORK_POLICY = "mirrorstack-ingress"  # the stack's one NetworkPolicy (kubernetes.network_policy)


def mebibytes(heap: str) -> int:
    """`-Xmx` sizes (512m, 1g) in MiB."""
    scale = {"k": 1 / 1024, "m": 1, "g": 1024}
    return int(float(heap[:-1]) * scale[heap[-1].lower()]) if heap[-1].isalpha() else int(heap) // 2**20


def group_labels(group: ServiceGroup) -> dict[str, str]:
    """The set's labels, with values Kubernetes accepts (an alias may hold '_')."""
    return {key: dns_label(value) for key, value in group.labels.items()}


def spread_apart(members: dict[str, str]) -> dict:
    """Pod spec fields keeping a set's members on different nodes and zones
    where the cluster has several; preferences only, so a 1-node cluster still
    runs them all."""
    selector = {"matchLabels": members}
    return {
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}}]}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                       "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": selector}]}


def data_claim(size: str, storage_class: str | None) -> dict:
    """The claim template of a service's data volume (mounted at DATA_MOUNT)."""
    return {"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}},
        **({"storageClassName": storage_class} if storage_class else {})}}


def network_policy(namespace: str, settings: KubernetesNetworkPolicy) -> dict:
    """Ingress to every pod of the stack's namespace only from pods of that
    namespace and the declared clients; egress is left open."""
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": NETWORK_POLICY, "namespace": namespace,
                     "labels": {"app.kubernetes.io/part-of": "mirrorstack"}},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"],
                 "ingress": [{"from": [{"podSelector": {}}, *(c.policy_peer() for c in settings.clients)]}]}}


def secret_keys(service: str, files: dict) -> dict:
    """`secrets/<name>` paths → the Secret's keys (mounted at `<folder>/secrets`)."""
    out = {}
    for path, content in (files or {}).items():
        name = path.removeprefix(f"{SECRETS_DIR}/")
        if not path.startswith(f"{SECRETS_DIR}/") or not re.fullmatch(r"[-._a-zA-Z0-9]+", name):
            raise ValueError(f"{service}: secret file {path!r} must be {SECRETS_DIR}/<name> "
                             "(letters, digits, '-', '_', '.'): a Secret is mounted there")
        out[name] = content
    return out


class Files(dict):
    """ConfigMap data plus where each key is mounted (one subPath mount per file)."""

    def __init__(self, data: dict[str, str], paths: dict[str, str]):
        super().__init__(data)
        self.paths = paths


# The validation job's files for executor pods, beside its main file in the job's ConfigMap.
EXECUTOR_SCRIPT, EXECUTOR_POD = "executor.sh", "executor-pod.json"


def pod_identity_env() -> list[dict]:
    """The pod's own name and IP in its environment (a Spark driver names them to its executors)."""
    return [{"name": POD_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]


def executor_pod_template(labels: dict, security: dict, mounts: list, volumes: list, command: list[str]) -> dict:
    """The pod Spark's Kubernetes scheduler makes each executor from: the driver's security, files
    and client folders; Spark adds the image, resources, its settings and the argument `executor`."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": labels}, "spec": {
        "securityContext": security, "volumes": volumes,
        "containers": [{"name": "executor", "command": command, "volumeMounts": mounts,
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}}
