"""`platform: kubernetes` for real: the private cluster of tools.kube_cluster
(API server with RBAC, kubelet, containerd, kube-proxy, CoreDNS, the images of
`make images` imported), the kubernetes provider `make plugins` built, the
real engine. One cluster for the module, one stack on it, many checks; the
last test stops the cluster and compares the host with how it was before."""
from __future__ import annotations

import json
import re
import threading
import time

import pytest
import requests
import yaml

from mirrorstack.monitoring.metrics import MM2_RECORDS
from mirrorstack.platforms import kube_tunnel
from mirrorstack.versions import MIRRORSTACK_IMAGES, mirrorstack_image
from tests.support import kube
from tests.support.kafka_clients import admin, consume, create_topic, produce
from tests.support.stacks import REPO, stack_project
from tools.kube import layout, pki

pytestmark = pytest.mark.integration

NAMESPACE = "mirrorstack-aggregation"
DEPLOYER = pki.CLIENTS["deployer"][0]  # a user with only the docs' deployer role
NODE_PORTS = {"us": 31090, "uk": 31091, "central": 31092}
RECORDS = 300  # per region and round: a few batches per partition
TOPOLOGY = {
    "platform": "kubernetes",
    # a tenth of a core requested per broker and controller: 7 JVMs, Prometheus and the Spark Job fit the 2-core node
    "clusters": {alias: {"brokers": 1, "node_ports": port, "resources": {"cpus": 0.1}}
                 for alias, port in NODE_PORTS.items()},
    "flows": [{"sources": ["us", "uk"], "target": "central", "topics": ["orders"], "replication_policy": "identity"}],
    "monitoring": {"scrape_interval": "2s", "grafana": False},
    "images": {key: mirrorstack_image(key) for key in MIRRORSTACK_IMAGES},  # imported into the cluster
}


@pytest.fixture(scope="module")
def cluster():
    """The host before the cluster, and the cluster started with the images."""
    if kube.running():
        pytest.fail("a cluster of tools.kube_cluster already runs: this module starts and stops its own")
    first = kube.host()
    second = (time.sleep(1), kube.host())[1]
    # sysctls that move by themselves (not settings) are left out of the comparison
    volatile = {k for k in first["sysctls"].keys() | second["sysctls"].keys()
                if first["sysctls"].get(k) != second["sysctls"].get(k)}
    try:
        started = kube.cluster_cli("start", "--images")
        yield {"before": first, "volatile": volatile, "started": started.stdout}
    finally:
        kube_tunnel.close_all()
        if kube.running():
            kube.cluster_cli("stop", "--purge", check=False, timeout=300)


def _deployer_role() -> dict:
    """The ClusterRole docs/operations/platforms.md tells users to grant whoever runs `pulumi up`."""
    text = (REPO / "docs" / "operations" / "platforms.md").read_text()
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.S)]
    (role,) = [b for b in blocks if isinstance(b, dict) and b.get("kind") == "ClusterRole"]
    return role


@pytest.fixture(scope="module")
def aggregation(cluster, tmp_path_factory):
    """The stack, deployed by an identity holding only the docs' deployer role."""
    role = _deployer_role()
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": role["metadata"]["name"]},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": role["metadata"]["name"]},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": DEPLOYER}]}
    kube.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [role, binding]}))
    with stack_project("aggregation", tmp_path_factory.mktemp("kube-aggregation"), TOPOLOGY) as project:
        project.env = {**kube.engine_env(project.env), "KUBECONFIG": str(pki.kubeconfig_path("deployer"))}
        yield project


def test_the_cluster_is_a_real_one_with_rbac(cluster):
    assert cluster["started"].strip().splitlines()[-1] == str(layout.KUBECONFIG)
    assert "starting" not in kube.cluster_cli("start", "--images").stdout  # idempotent: the same cluster, at once
    node = json.loads(kube.kubectl("get", "node", layout.NODE, "-o", "json"))
    assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == layout.ZONE
    # RBAC, not AlwaysAllow: a service account has no rights it was not given
    assert kube.kubectl("auth", "can-i", "create", "pods", "--as", "system:serviceaccount:default:default",
                        expect=1).strip() == "no"
    assert kube.kubectl("auth", "can-i", "get", "secrets", "--as", DEPLOYER, expect=1).strip() == "no"


def _node_address() -> str:
    node = json.loads(kube.kubectl("get", "node", layout.NODE, "-o", "json"))
    return next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")


def _prometheus(expr: str) -> list[dict]:
    url = kube_tunnel.local(kube_tunnel.address(NAMESPACE, "service", "prometheus", 9090,
                                                kubeconfig=str(layout.KUBECONFIG)))
    reply = requests.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10)
    reply.raise_for_status()
    return reply.json()["data"]["result"]


def _wait(what: str, probe, timeout: float = 180):
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(2)
    raise AssertionError(f"{what}: not within {timeout:.0f}s (last: {last!r})")


def _validated(expected: int) -> None:
    """The validation Job's summary (its log): every record of central's `orders` matched, none missing."""
    log = kube.kubectl("logs", "--namespace", NAMESPACE, "job/validation-job", timeout=60)
    counts = re.search(r"source (\d+)  target (\d+)  matched (\d+)  missing (\d+)", log)
    assert "replication check PASSED" in log and counts, log[-3000:]
    assert tuple(map(int, counts.groups())) == (expected, expected, expected, 0), log[-3000:]


def test_aggregation_replicates_is_scraped_and_validated(aggregation):
    project = aggregation
    up = project.run("up", "--yes", "--skip-preview", timeout=900)
    out = project.outputs()
    assert out["node_ports"] == {alias: [port] for alias, port in NODE_PORTS.items()}, up.stdout[-2000:]
    assert all(".svc.cluster.local:" in servers for servers in out["clusters"].values())
    assert {s["state"] for states in out["flows"].values() for s in states.values()} == {"RUNNING"}

    # a client outside the cluster: through the NodePorts, each broker advertising its node's address
    node = _node_address()
    outside = {alias: f"{node}:{port}" for alias, port in NODE_PORTS.items()}
    sent = []
    for region in ("us", "uk"):
        create_topic(outside[region], "orders", partitions=2, replication_factor=1)
        sent += produce(outside[region], "orders", RECORDS, prefix=region)
    arrived = consume(outside["central"], "orders", expected=2 * RECORDS, timeout=240)
    assert sorted(r.value for r in arrived) == sorted(r.value for r in sent)

    # rack awareness: each broker's rack is its node's zone (the pod's copied label), and the
    # flows' consumers say theirs, resolved by the worker
    for alias in NODE_PORTS:
        client = admin(outside[alias])  # kept: the future fails if its client is collected first
        assert {n.rack for n in client.describe_cluster().result(timeout=30).nodes} == {layout.ZONE}
    worker_log = kube.kubectl("logs", "--namespace", NAMESPACE, "connect-central-0-0", timeout=60)
    assert f"client.rack = {layout.ZONE}" in worker_log

    # Prometheus in the cluster scrapes every JMX exporter: 3 x (controller + broker) + 1 Connect worker
    ups = _wait("7 targets up", lambda: (lambda r: r if len(r) == 7 and all(x["value"][1] == "1" for x in r)
                                         else None)(_prometheus("up")))
    assert sorted((u["metric"]["cluster"], u["metric"]["role"]) for u in ups) == sorted(
        [(a, r) for a in NODE_PORTS for r in ("broker", "controller")] + [("central", "connect")])
    def counted() -> dict | None:
        counts = {s["metric"]["source"]: float(s["value"][1])
                  for s in _prometheus(f"sum by (source) ({MM2_RECORDS})")}
        return counts if set(counts) == {"us", "uk"} and min(counts.values()) >= RECORDS else None
    assert set(_wait("MM2's record counts of both sources", counted)) == {"us", "uk"}

    # the validation Job (Spark in the cluster) reconciles every record; a failed Job fails `up`
    project.run("config", "set", "--path", "mirrorstack:topology.validation.wait_seconds", "60")
    project.run("up", "--yes", "--skip-preview", timeout=900)
    assert project.outputs()["validation"]["job"] == "validation-job"
    _validated(2 * RECORDS)

    # central's broker pod deleted while records flow: the StatefulSet brings it back, nothing is lost
    more: list = []
    producing = threading.Thread(target=lambda: more.extend(
        produce(outside["us"], "orders", 2 * RECORDS, prefix="during", per_second=40)))
    producing.start()
    time.sleep(3)  # records are flowing when the broker goes
    kube.kubectl("delete", "pod", "--namespace", NAMESPACE, "central-broker-0-0", "--wait=false")
    kube.kubectl("rollout", "status", "--namespace", NAMESPACE, "statefulset/central-broker-0", "--timeout=180s",
                 timeout=200)
    producing.join(timeout=120)
    assert len(more) == 2 * RECORDS
    arrived = consume(outside["central"], "orders", expected=4 * RECORDS, timeout=240)
    assert {r.value for r in more} <= {r.value for r in arrived}
    project.run("up", "--yes", "--skip-preview", "--config", "mirrorstack:validationRunId=after-broker-loss",
                timeout=900)
    _validated(4 * RECORDS)

    # destroy leaves no object of the stack
    project.run("destroy", "--yes", "--skip-preview", timeout=600)
    assert kube.kubectl("get", "namespace", NAMESPACE, expect=1, timeout=60) == ""


def test_stop_puts_the_host_back(cluster):
    kube_tunnel.close_all()
    kube.cluster_cli("stop", "--purge", timeout=300)
    before, after, volatile = cluster["before"], kube.host(), cluster["volatile"]
    changed = {k: (before["sysctls"].get(k), after["sysctls"].get(k))
               for k in before["sysctls"].keys() | after["sysctls"].keys()
               if k not in volatile and before["sysctls"].get(k) != after["sysctls"].get(k)}
    assert changed == {}, "\n".join(f"{k}: {a} -> {b}" for k, (a, b) in sorted(changed.items()))
    assert after["iptables"] == before["iptables"]
    assert after["netns"] == before["netns"] and after["bridge"] == before["bridge"]
    assert not layout.RUN.exists()
