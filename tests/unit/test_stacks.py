"""Every stacks/Pulumi.*.yaml: loads, passes the JSON Schema an editor would
check it with, and builds on the docker and kubernetes platforms under Pulumi
mocks (the same topology with `platform` switched)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from mirrorstack.mm2.connectors import CHECKPOINT, HEARTBEAT, POLICY_CLASSES, SOURCE, connector_name
from mirrorstack.model.spec import SCHEMA_FILE, TopologyError, load_topology
from mirrorstack.platforms import make_platform
from mirrorstack.platforms.kubernetes.manifests import KUBERNETES_VERSION
from mirrorstack.validation.package import ZIP_NAME
from tests.support.stacks import on_platform
from tests.support import mocked_runs, pulumi_mocks

ROOT = Path(__file__).resolve().parents[2]
STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
SCHEMA = json.loads(SCHEMA_FILE.read_text())


def config(stack: str) -> dict:
    document = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    return document["config"]["mirrorstack:topology"]


def schema_errors(value) -> list[tuple[str, str]]:
    """(JSON path, message) of every violation, with the draft the schema's $schema names."""
    validator = jsonschema.validators.validator_for(SCHEMA)(SCHEMA)
    return sorted((e.json_path, e.message) for e in validator.iter_errors(value))


def test_the_ten_stacks_are_there():
    assert STACKS == ["active-active", "active-passive", "aggregation", "dev-copy", "edge-push", "existing-connect",
                      "fan-out", "forwarding", "migration", "secure"]


def test_schema_is_a_valid_2020_12_schema():
    assert jsonschema.validators.validator_for(SCHEMA) is jsonschema.Draft202012Validator
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("stack", STACKS)
def test_stack_loads(stack):
    topology = load_topology(config(stack))
    assert topology.platform == "local"


@pytest.mark.parametrize("stack", STACKS)
def test_stack_passes_the_editor_schema_check(stack):
    assert schema_errors(config(stack)) == []


def _first_alias(c: dict) -> str:
    return next(iter(c["clusters"]))


BREAKAGES = {
    "unknown key": (lambda c: c["flows"][0].update(topic=["x"]), "$.flows[0]", "'topic' was unexpected"),
    "brokers as a string": (lambda c: c["clusters"][_first_alias(c)].update(brokers="two"),
                            "$.clusters.{alias}.brokers", "'two' is not of type 'integer'"),
    "sources beside source": (lambda c: c["flows"][0].update(sources=[_first_alias(c)]), "$.flows[0]", ""),
    "unknown platform": (lambda c: c.update(platform="nomad"), "$.platform", "'nomad' is not one of"),
}


@pytest.mark.parametrize("breakage", BREAKAGES)
@pytest.mark.parametrize("stack", STACKS)
def test_broken_copy_fails_the_schema_check_and_the_model(stack, breakage):
    broken, (change, path, message) = copy.deepcopy(config(stack)), BREAKAGES[breakage]
    change(broken)
    errors = schema_errors(broken)
    path = path.format(alias=_first_alias(broken))
    assert any(p == path and message in m for p, m in errors), errors
    with pytest.raises(TopologyError):  # the schema and the model agree
        load_topology(broken)


# ---------------------------------------------------------------- docker and kubernetes under mocks

# On kubernetes, monitoring and validation need images that carry the JMX agent and Spark's Kafka jars.
REGISTRY_IMAGES = {"kafka": "registry.example.com/mirrorstack/kafka:1", "spark": "registry.example.com/mirrorstack/spark:1"}


@pytest.fixture(scope="module", params=[(s, p) for s in STACKS for p in ("docker", "kubernetes")],
                ids=lambda sp: f"{sp[0]}-{sp[1]}")
def built(request, tmp_path_factory):
    stack, platform = request.param
    topology = load_topology({**on_platform(config(stack), platform), "images": REGISTRY_IMAGES})
    mocks, out = pulumi_mocks.deploy(lambda: make_platform(topology.platform, stack, images=topology.images,
                                                     local_dir=str(tmp_path_factory.mktemp(stack))),
                               topology=topology, stack=stack)
    return topology, mocks, out


def test_one_mm2_resource_per_flow_with_its_connectors(built):
    topology, mocks, out = built
    resources = mocked_runs.connectors_of(mocks)
    assert set(resources) == {f"{flow.name}-connectors" for flow in topology.flows}
    for flow in topology.flows:
        mm2 = resources[f"{flow.name}-connectors"]
        kinds = ["source", *["checkpoint"] * flow.checkpoints, *["heartbeat"] * flow.heartbeats]
        assert set(mm2["connectors"]) == {flow.connector_name(kind) for kind in kinds}
        if flow.connector_names is None:
            assert set(mm2["connectors"]) == {connector_name(flow.name, k) for k in (SOURCE, CHECKPOINT, HEARTBEAT)
                                              if k == SOURCE or (flow.checkpoints if k == CHECKPOINT else flow.heartbeats)}
        assert mm2["connect_url"] == out["connect"][flow.connect]
        source = mm2["connectors"][flow.connector_name("source")]
        assert source["topics"] == ",".join(flow.topics)
        assert source["replication.policy.class"] == POLICY_CLASSES[flow.replication_policy]
        assert (source["source.cluster.alias"], source["target.cluster.alias"]) == (flow.source, flow.target)


def expected_services(topology) -> set[str]:
    """clusters x (1 controller + brokers), plus every Connect worker."""
    services = {f"connect-{name}-{i}" for name, cc in topology.connect.items() if not cc.is_external
                for i in range(cc.workers)}
    for alias, cluster in topology.clusters.items():
        if not cluster.is_external:
            services |= {f"{alias}-controller", *(f"{alias}-broker-{i}" for i in range(cluster.brokers))}
    return services


def test_one_container_or_statefulset_per_service(built):
    topology, mocks, _ = built
    if topology.platform == "docker":  # Kafka's JVMs; monitoring containers are checked in test_monitoring_graphs
        services = set(mocked_runs.containers(mocks)) - {"prometheus", "grafana"}
    else:
        services = set(mocks.of_type("kubernetes:apps/v1:StatefulSet"))
    assert services == expected_services(topology)
    assert len(services) == (sum(1 + c.brokers for c in topology.clusters.values() if not c.is_external)
                             + sum(cc.workers for cc in topology.connect.values() if not cc.is_external))


def secured_clusters(topology) -> set[str]:
    """Deployed secured clusters (generated CA, keys and password). External
    clusters get client files only from mirrorstack:clusterSecrets, which
    these builds do not set."""
    return {alias for alias, c in topology.clusters.items() if not c.is_external and c.security.secured}


def expected_secrets(topology) -> int:
    """Secrets besides the validation job's and Grafana's: one per node of a
    secured cluster, per Connect worker of one, and the cluster's client Secret."""
    secured = secured_clusters(topology)
    return (sum(2 + topology.clusters[a].brokers for a in secured)
            + sum(cc.workers for cc in topology.connect.values() if cc.kafka in secured))


def expected_budgets(topology) -> int:
    """PodDisruptionBudgets: a deployed cluster's brokers and its controllers, a deployed Connect group."""
    return (2 * sum(not c.is_external for c in topology.clusters.values())
            + sum(not cc.is_external for cc in topology.connect.values()))


def test_kubernetes_manifests_validate_strictly(built):
    topology, _, out = built
    if topology.platform != "kubernetes":
        assert not out["manifests"]
        return
    # namespace and its NetworkPolicy; per service configmap, service, statefulset; a PodDisruptionBudget
    # per set; the validation job's secret, configmap, job
    # monitoring: prometheus configmap, service, deployment; grafana secret, configmap, service, deployment
    # secured clusters: a Secret per node and Connect worker, a client Secret per cluster
    # each deployed Connect group's supervisor: configmap, service, deployment (+ a Secret with REST auth)
    supervisors = [cc for cc in topology.connect.values() if not cc.is_external and cc.self_healing.enabled]
    assert len(out["manifests"]) == (2 + 3 * len(expected_services(topology)) + expected_budgets(topology)
                                     + sum(3 + cc.rest_auth for cc in supervisors)
                                     + 3 * (topology.validation is not None)
                                     + 7 * (topology.monitoring is not None) + expected_secrets(topology))
    for manifest in out["manifests"]:
        kubernetes_validate.validate(manifest, desired_version=KUBERNETES_VERSION, strict=True)


def test_the_validation_job_gets_its_package_as_a_zip_on_py_files(built):
    """A stack with a validation job ships the package; one without ships nothing of it."""
    topology, mocks, out = built
    if topology.validation is not None:
        mocked_runs.assert_ships_the_job_package(topology.platform, mocks, out)
    else:
        assert ZIP_NAME not in repr([r.inputs for r in mocks.resources])


def test_no_key_or_password_outside_secrets(built):
    """Whatever the stack: the generated PEM keys and passwords appear in no
    resource input that is not a Pulumi secret (ConfigMaps, commands, env,
    connector configs), and on kubernetes only in Secret objects."""
    topology, mocks, out = built
    assert pulumi_mocks.leaks(mocks) == []
    if topology.platform == "kubernetes":
        holders = {(m["kind"], m["metadata"]["name"]) for m in out["manifests"] if pulumi_mocks.holds_secret_text(m)}
        assert {kind for kind, _ in holders} <= {"Secret"}, holders
        # (Grafana's generated admin password is in its Secret too.)
        assert {f"{a}-client" for a in secured_clusters(topology)} <= {name for _, name in holders}
