"""A set of services is described at once and run in turn (platforms.base.run_in_turn),
and a platform keeps no state between the calls that describe a member and its run:
asking where a service keeps its data or which NodePort it is published on makes
nothing; the member's description says so (`keeps_data`, `node_ports`)."""
from __future__ import annotations

import pulumi
import pytest

from mirrorstack.model.spec import Resources
from mirrorstack.platforms.base import ServiceGroup, run_in_turn
from mirrorstack.platforms.descriptions import JavaService, ServiceSet
from mirrorstack.platforms.kubernetes.platform import KubernetesPlatform
from tests.support.pulumi_mocks import RecordingMocks, RecordingMonitor

STS = "kubernetes:apps/v1:StatefulSet"
ROLLOUT = "pulumi-python:dynamic/kubernetes:StatefulSetRollout"


def member(name: str, **fields) -> JavaService:
    return JavaService(name, main="kafka.Kafka", args=["{dir}/server.properties"], files={"server.properties": ""},
                       health={"kind": "tcp", "host": name, "port": "9092"}, resources=Resources(), **fields)


def test_each_member_waits_for_what_all_wait_for_and_the_one_before_or_its_check():
    asked = []

    def run(m, depends):
        asked.append((m.name, depends))
        return f"ran-{m.name}"

    checks = {"b1": "login-b1"}  # a check after b1's start: b2 waits for it instead of b1
    ran = run_in_turn([member("b0"), member("b1"), member("b2")], run, first_after=["quorum"],
                      each_after=["kafka"], then=lambda m, r: checks.get(m.name))
    assert ran == ["ran-b0", "ran-b1", "ran-b2"]
    assert asked == [("b0", ["kafka", "quorum"]), ("b1", ["kafka", "ran-b0"]), ("b2", ["kafka", "login-b1"])]


def test_asking_for_a_data_folder_or_a_node_port_makes_nothing():
    platform = KubernetesPlatform("sets")
    platform.address("b0", "external")  # a port is given out once, whoever asks
    before = {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v)
              for k, v in vars(platform).items()}
    platform.data_dir("b0")
    advertised, listen = platform.node_port("b0", "external", 31090)
    assert advertised.endswith(":31090") and listen.startswith("0.0.0.0:")
    assert {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v)
            for k, v in vars(platform).items()} == before


@pytest.fixture(scope="module")
def k8s_set():
    """A set of three on kubernetes under mocks: b0 keeps data and is published on a NodePort,
    b1 keeps data, w0 keeps none though its data folder was asked for."""
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="mirrorstack", stack="sets", preview=False, monitor=RecordingMonitor(mocks))
    built = {}

    @pulumi.runtime.test
    def program():
        platform = KubernetesPlatform("sets")
        platform.data_dir("w0")
        platform.node_port("b0", "external", 31090)
        members = (member("b0", keeps_data=True, node_ports={"external": 31090}), member("b1", keeps_data=True),
                   member("w0"))
        platform.run_set(ServiceSet(ServiceGroup.brokers("us"), members))
        return pulumi.Output.from_input(platform.manifests).apply(lambda m: built.update(manifests=m))
    program()
    return mocks, built["manifests"]


def test_a_volume_where_the_member_keeps_data_and_nowhere_else(k8s_set):
    _, manifests = k8s_set
    claims = {m["metadata"]["name"]: bool(m["spec"].get("volumeClaimTemplates"))
              for m in manifests if m["kind"] == "StatefulSet"}
    assert claims == {"b0": True, "b1": True, "w0": False}


def test_a_node_port_service_and_the_node_address_only_for_the_member_published(k8s_set):
    _, manifests = k8s_set
    node_ports = [m for m in manifests if m["kind"] == "Service" and m["spec"].get("type") == "NodePort"]
    assert [(m["metadata"]["name"], m["spec"]["ports"][0]["nodePort"]) for m in node_ports] == [("b0-external", 31090)]
    env = {m["metadata"]["name"]: {e["name"] for e in m["spec"]["template"]["spec"]["containers"][0]["env"]}
           for m in manifests if m["kind"] == "StatefulSet"}
    assert "HOST_IP" in env["b0"] and "HOST_IP" not in env["b1"] | env["w0"]


def test_one_budget_made_with_the_set_before_its_members_and_members_in_turn(k8s_set):
    mocks, manifests = k8s_set
    kinds = [m["kind"] for m in manifests]
    assert kinds.count("PodDisruptionBudget") == 1
    assert kinds.index("PodDisruptionBudget") < kinds.index("StatefulSet")
    sets = {r.registered_name: r for r in mocks.resources if r.typ == STS}
    # each StatefulSet after the one before's rollout (what "done" means on kubernetes), the first after none
    rollouts = {name: {d[1] for d in mocks.dependencies[(STS, sets[name].registered_name)] if d[0] == ROLLOUT}
                for name in sets}
    assert rollouts == {"b0": set(), "b1": {"b0-rollout"}, "w0": {"b1-rollout"}}
