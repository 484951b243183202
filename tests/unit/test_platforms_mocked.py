"""The docker and kubernetes platforms under Pulumi mocks: the aggregation
stack's resource graph and the inputs each resource gets (no engine, no
provider plugins; Kubernetes manifests checked against the schema)."""
from __future__ import annotations

import json

import kubernetes_validate
import pytest
import yaml

from mirrorstack.platforms.containers import AFTER_START_DONE, dns_label, probe_command
from mirrorstack.platforms.docker.platform import DockerPlatform
from mirrorstack.platforms.kubernetes.manifests import KUBERNETES_VERSION
from mirrorstack.platforms.kubernetes.platform import KubernetesPlatform
from mirrorstack.platforms.local.platform import LocalPlatform
from mirrorstack.versions import kafka_version, spark_version
from tests.support.mocked_runs import (
    JOB, STACK, assert_ships_the_job_package, connectors_of, container_commands, containers, local_commands,
    manifests_of, script_commands, script_steps,
)
from tests.support.pulumi_mocks import DYNAMIC, ROOT, deploy, ints, load_topology, stack_topology

NAMESPACE = "mirrorstack-aggregation"
CONTROLLERS = {"us-controller", "uk-controller", "central-controller"}
BROKERS = {"us-broker-0", "uk-broker-0", "central-broker-0"}
WORKERS = {"connect-central-0"}
SERVICES = CONTROLLERS | BROKERS | WORKERS
# The sets of the aggregation stack (kubernetes: one PodDisruptionBudget each) → their members.
GROUPS = {**{f"{a}-controllers": {f"{a}-controller"} for a in ("us", "uk", "central")},
          **{f"{a}-brokers": {f"{a}-broker-0"} for a in ("us", "uk", "central")},
          "connect-central-workers": WORKERS}


# ---------------------------------------------------------------- docker

@pytest.fixture(scope="module")
def docker_run():
    return deploy(lambda: DockerPlatform(STACK))


def uploaded(container: dict, name: str) -> str:
    (content,) = [u["content"] for u in container["uploads"] if u["file"].endswith(f"/{name}")]
    return content


def test_docker_one_network_and_one_image_for_the_stack(docker_run):
    mocks, _ = docker_run
    assert list(mocks.of_type("docker:index/network:Network").values()) == [{"name": "mirrorstack-aggregation"}]
    images = mocks.of_type("docker:index/remoteImage:RemoteImage")
    assert {n: i["name"] for n, i in images.items()} == {
        "kafka-image": f"apache/kafka:{kafka_version()}", "spark-image": f"apache/spark:{spark_version()}-python3",
        # the Connect group's self-healing supervisor: python3 in the spark image
        "supervisor-central-image": f"apache/spark:{spark_version()}-python3"}
    assert all(image["keepLocally"] is True for image in images.values())


def test_docker_one_container_and_one_volume_per_service(docker_run):
    mocks, _ = docker_run
    by_name = containers(mocks)
    assert set(by_name) == SERVICES
    volumes = mocks.of_type("docker:index/volume:Volume")
    assert set(volumes) == {f"{s}-data" for s in SERVICES}
    for service, container in by_name.items():
        assert container["volumes"] == [{"volumeName": volumes[f"{service}-data"]["name"],
                                         "containerPath": "/var/lib/kafka/data"}]


def test_docker_containers_run_the_pinned_image_on_the_stack_network(docker_run):
    mocks, _ = docker_run
    for service, container in containers(mocks).items():
        assert container["image"] == f"apache/kafka:{kafka_version()}"
        assert container["name"] == f"mirrorstack-aggregation-{service}"
        assert container["hostname"] == service
        assert container["networksAdvanced"] == [{"name": "mirrorstack-aggregation", "aliases": [service]}]


def test_docker_broker_files_use_in_network_addresses(docker_run):
    mocks, _ = docker_run
    props = uploaded(containers(mocks)["us-broker-0"], "server.properties").splitlines()
    assert "advertised.listeners=PLAINTEXT://us-broker-0:9092" in props
    assert "controller.quorum.voters=1@us-controller:9093" in props
    assert "log.dirs=/var/lib/kafka/data" in props
    worker = uploaded(containers(mocks)["connect-central-0"], "worker.properties").splitlines()
    assert "bootstrap.servers=central-broker-0:9092" in worker
    assert "rest.advertised.host.name=connect-central-0" in worker


def test_docker_command_formats_storage_once_then_execs_the_service(docker_run):
    mocks, _ = docker_run
    broker = containers(mocks)["us-broker-0"]
    assert broker["entrypoints"] == ["/bin/sh", "-c"]
    (script,) = broker["command"]
    (prepare, run) = script_steps(script)
    assert prepare[prepare.index("-cp") + 1:] == [
        "/opt/kafka/libs/*", "kafka.tools.StorageTool", "format", "--ignore-formatted", "-t", prepare[-3],
        "-c", "/opt/mirrorstack/us-broker-0/server.properties"]
    # The java command line itself, not the image's scripts (kafka-run-class.sh) with KAFKA_* variables.
    assert run == ["java", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                   "-Dlog4j2.configurationFile=/opt/mirrorstack/us-broker-0/log4j2.properties",
                   "-cp", "/opt/kafka/libs/*", "kafka.Kafka", "/opt/mirrorstack/us-broker-0/server.properties"]
    assert {u["file"] for u in broker["uploads"]} == {
        "/opt/mirrorstack/us-broker-0/server.properties", "/opt/mirrorstack/us-broker-0/log4j2.properties"}
    assert not broker.get("envs") and broker["memory"] == 2304 and "cpus" not in broker
    assert "-Xmx256m" in script_steps(containers(mocks)["us-controller"]["command"][0])[-1]
    assert containers(mocks)["connect-central-0"]["command"][0].startswith("exec java ")  # nothing to prepare


def test_docker_replaces_named_containers_volumes_and_network_by_deleting_first(docker_run):
    mocks, _ = docker_run
    named = [r for r in mocks.resources if r.typ in (
        "docker:index/container:Container", "docker:index/volume:Volume", "docker:index/network:Network")]
    assert len(named) == 2 * len(SERVICES) + 1 + 1 + 1  # + the network, the job's and the supervisor's containers
    assert {r.name: mocks.delete_before_replace[(r.typ, r.registered_name)] for r in named} == {
        r.name: True for r in named}
    # Images are shared between stacks (keep_locally): nothing to delete first.
    images = [r for r in mocks.resources if r.typ == "docker:index/remoteImage:RemoteImage"]
    assert not any(mocks.delete_before_replace[(r.typ, r.registered_name)] for r in images)


def test_docker_only_connect_rest_is_published_and_only_on_loopback(docker_run):
    mocks, built = docker_run
    _, host_port = built["platform"].host_address("connect-central-0", "rest")
    for service, container in containers(mocks).items():
        if service in WORKERS:
            assert container["ports"] == [{"internal": 8083, "external": host_port, "ip": "127.0.0.1"}]
        else:
            assert not container.get("ports")


def test_docker_every_container_has_a_healthcheck_and_a_restart_policy(docker_run):
    mocks, _ = docker_run
    for container in containers(mocks).values():
        check = container["healthcheck"]
        assert check["tests"][0] == "CMD" and len(check["tests"]) > 1
        assert {"interval", "timeout", "startPeriod", "retries"} <= check.keys()
        assert container["restart"] == "unless-stopped"
        assert container["wait"] is True  # `depends_on` a container means it is healthy
    by_name = containers(mocks)
    controller_check = by_name["us-controller"]["healthcheck"]["tests"]
    assert controller_check == ["CMD", "bash", "-c", "exec 3<>/dev/tcp/us-controller/9093"]
    # A broker is healthy once its listener accepts (Kafka opens it when it serves): no JVM started.
    assert by_name["us-broker-0"]["healthcheck"]["tests"] == ["CMD", "bash", "-c", "exec 3<>/dev/tcp/us-broker-0/9092"]
    for container in containers(mocks).values():
        assert not any("java" in part or "kafka-" in part for part in container["healthcheck"]["tests"])
    # Connect's check runs inside the container: the in-network port, not the published one.
    connect_check = by_name["connect-central-0"]["healthcheck"]["tests"][-1]
    assert "/dev/tcp/connect-central-0/8083" in connect_check and "/connector-plugins" in connect_check


def test_docker_mm2_gets_the_published_url_and_in_network_bootstrap(docker_run):
    mocks, built = docker_run
    host, port = built["platform"].host_address("connect-central-0", "rest")
    assert host == "127.0.0.1"
    flows = connectors_of(mocks)
    assert set(flows) == {"us->central-connectors", "uk->central-connectors"}
    us = flows["us->central-connectors"]
    assert us["flow"] == "us->central"
    assert us["connect_url"] == f"http://127.0.0.1:{port}"
    assert set(us["connectors"]) == {f"us->central.Mirror{k}Connector" for k in ("Source", "Checkpoint", "Heartbeat")}
    for config in us["connectors"].values():
        assert config["source.cluster.bootstrap.servers"] == "us-broker-0:9092"
        assert config["target.cluster.bootstrap.servers"] == "central-broker-0:9092"
    assert built["clusters"] == {"us": "us-broker-0:9092", "uk": "uk-broker-0:9092", "central": "central-broker-0:9092"}
    assert built["connect"] == {"central": f"http://127.0.0.1:{port}"}


def test_docker_host_ports_are_deterministic_per_stack():
    first, again = DockerPlatform(STACK), DockerPlatform(STACK)
    host, port = first.host_address("connect-central-0", "rest")
    assert (host, port) == again.host_address("connect-central-0", "rest")
    assert 10000 <= port < 30000
    assert first.host_address("connect-central-1", "rest") != (host, port)


# ---------------------------------------------------------------- shared helpers

@pytest.mark.parametrize("name, ok", [("us-broker-0", True), ("connect-central-0", True),
                                       ("US_east-broker-0", False), ("0day", False), ("a" * 80, False)])
def test_service_names_become_dns_1035_labels(name, ok):
    label = dns_label(name)
    assert len(label) <= 63 and label[0].isalpha() and set(label) <= set("abcdefghijklmnopqrstuvwxyz0123456789-")
    assert (label == name) is ok
    assert dns_label("us_east") != dns_label("us-east")  # sanitised names cannot collide


def test_service_groups_name_and_label_each_set_apart():
    from mirrorstack.platforms.base import ServiceGroup
    from mirrorstack.platforms.kubernetes.manifests import group_labels
    groups = [ServiceGroup.brokers("connect"), ServiceGroup.controllers("connect"),
              ServiceGroup.workers("brokers", "connect"), ServiceGroup.workers("x", "connect")]
    assert len({g.name for g in groups}) == len({tuple(sorted(g.labels.items())) for g in groups}) == len(groups)
    assert ServiceGroup.workers("central", "us").labels == {
        "mirrorstack.io/cluster": "us", "mirrorstack.io/role": "connect", "mirrorstack.io/connect": "central"}
    # An alias may hold '_', which no DNS label does: Kubernetes gets a label-safe value, still one per alias.
    assert group_labels(ServiceGroup.brokers("us_east"))["mirrorstack.io/cluster"] != \
        group_labels(ServiceGroup.brokers("us-east"))["mirrorstack.io/cluster"]


def test_http_probe_checks_the_status_line():
    command = probe_command({"kind": "http", "url": "http://127.0.0.1:9999/-/ready"}, lambda h, p: ("prom", 9090))
    assert command[:2] == ["bash", "-c"]
    assert "/dev/tcp/prom/9090" in command[2] and "/-/ready" in command[2] and "' 200 '" in command[2]
    with pytest.raises(ValueError, match="unknown health check kind"):
        probe_command({"kind": "smoke"}, lambda h, p: (h, p))


# ---------------------------------------------------------------- kubernetes

FQDN = "{}.mirrorstack-aggregation.svc.cluster.local"


@pytest.fixture(scope="module")
def k8s_run():
    return deploy(lambda: KubernetesPlatform(STACK))


# The aggregation stack with a `kubernetes:` section set in full.
PRODUCTION = {"storage": {"class_name": "fast-ssd", "size": "50Gi", "on_destroy": "retain"},
              "termination_grace_seconds": 180,
              "network_policy": {"clients": [{"namespace": "analytics"}, {"namespace_labels": {"team": "payments"}},
                                             {"cidr": "10.20.0.0/16", "except_cidrs": ["10.20.5.0/24"]}]}}


def kubernetes_topology(section: dict | None):
    """The aggregation stack on kubernetes (its validation job needs a Spark image with the jars)."""
    return stack_topology("aggregation", platform="kubernetes", kubernetes=section,
                          images={"spark": "registry.example.com/mirrorstack/spark:1"})


@pytest.fixture(scope="module")
def k8s_production_run():
    topology = kubernetes_topology(PRODUCTION)
    return deploy(lambda: KubernetesPlatform(STACK, settings=topology.kubernetes), topology)


@pytest.fixture(scope="module")
def k8s_in_cluster_run():
    return deploy(lambda: KubernetesPlatform(STACK, rest_access="in-cluster"))


def test_docker_and_kubernetes_ship_the_job_package_as_a_zip_on_py_files(docker_run, k8s_run):
    assert_ships_the_job_package("docker", *docker_run)
    assert_ships_the_job_package("kubernetes", *k8s_run)


def test_k8s_one_namespace_and_per_service_configmap_service_statefulset(k8s_run):
    mocks, built = k8s_run
    assert set(mocks.of_type("kubernetes:core/v1:Namespace")) == {NAMESPACE}
    supervisor = "supervisor-central"  # the Connect group's self-healing, a Deployment
    assert set(mocks.of_type("kubernetes:core/v1:ConfigMap")) == \
        {f"{s}-files" for s in [*SERVICES, supervisor]} | {f"{JOB}-job"}
    assert set(mocks.of_type("kubernetes:core/v1:Service")) == SERVICES | {supervisor}
    assert set(mocks.of_type("kubernetes:apps/v1:StatefulSet")) == SERVICES
    assert set(mocks.of_type("kubernetes:apps/v1:Deployment")) == {supervisor}
    assert set(mocks.of_type("kubernetes:core/v1:Secret")) == {f"{JOB}-flows"}
    assert set(mocks.of_type("kubernetes:batch/v1:Job")) == {JOB}
    assert not mocks.of_type("kubernetes:batch/v1:CronJob")  # only with validation.schedule
    assert set(mocks.of_type("kubernetes:policy/v1:PodDisruptionBudget")) == set(GROUPS)
    assert set(mocks.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")) == {"mirrorstack-ingress"}
    assert len(built["manifests"]) == 1 + 1 + 3 * len(SERVICES) + len(GROUPS) + 3 + 3  # + the supervisor's three
    for manifest in built["manifests"][1:]:
        assert manifest["metadata"]["namespace"] == NAMESPACE


@pytest.mark.parametrize("version", [KUBERNETES_VERSION, kubernetes_validate.latest_version()])
@pytest.mark.parametrize("run", ["k8s_run", "k8s_production_run"])
def test_k8s_every_manifest_validates_strictly(run, version, request):
    _, built = request.getfixturevalue(run)
    for manifest in built["manifests"]:
        kubernetes_validate.validate(manifest, desired_version=version, strict=True)


def test_k8s_resources_get_exactly_the_validated_manifests(k8s_run):
    mocks, built = k8s_run
    registered = {(r.inputs["kind"], r.inputs["metadata"]["name"]): ints(r.inputs)
                  for r in mocks.resources if r.typ.startswith("kubernetes:") and "metadata" in r.inputs}
    assert {(m["kind"], m["metadata"]["name"]): m for m in built["manifests"]} == registered


def test_k8s_invalid_manifest_is_rejected_by_the_check(k8s_run):
    _, built = k8s_run
    bad = json.loads(json.dumps(manifests_of(built, "StatefulSet")["us-broker-0"]))
    bad["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}  # a typo strict mode catches
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, desired_version=KUBERNETES_VERSION, strict=True)


def test_k8s_broker_configmap_holds_server_properties(k8s_run):
    _, built = k8s_run
    data = manifests_of(built, "ConfigMap")["us-broker-0-files"]["data"]
    assert set(data) == {"server.properties", "log4j2.properties"}
    props = data["server.properties"].splitlines()
    assert f"advertised.listeners=PLAINTEXT://{FQDN.format('us-broker-0')}:9092" in props
    assert f"controller.quorum.voters=1@{FQDN.format('us-controller')}:9093" in props
    assert "log.dirs=/var/lib/kafka/data/kafka" in props


def test_k8s_services_are_headless_and_resolve_before_ready(k8s_run):
    _, built = k8s_run
    services = {n: s for n, s in manifests_of(built, "Service").items() if not n.startswith("supervisor-")}
    for name, service in services.items():
        assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
        assert service["spec"]["selector"]["app.kubernetes.io/instance"] == name
    assert services["us-broker-0"]["spec"]["ports"] == [{"name": "kafka", "port": 9092, "targetPort": 9092}]
    assert services["us-controller"]["spec"]["ports"][0]["port"] == 9093
    assert services["connect-central-0"]["spec"]["ports"][0]["port"] == 8083


def test_k8s_statefulsets_probe_mount_and_size_from_heap(k8s_run):
    _, built = k8s_run
    sets = manifests_of(built, "StatefulSet")
    for name, sts in sets.items():
        assert sts["spec"]["replicas"] == 1 and sts["spec"]["serviceName"] == name
        pod = sts["spec"]["template"]
        (container,) = pod["spec"]["containers"]
        assert container["image"] == f"apache/kafka:{kafka_version()}"
        assert container["readinessProbe"]
        assert container["resources"]["limits"]["memory"] == container["resources"]["requests"]["memory"]
        assert len(pod["metadata"]["annotations"]["mirrorstack.io/files-sha256"]) == 64
        assert pod["spec"]["volumes"] == [{"name": "files", "configMap": {"name": f"{name}-files"}}]
        has_claim = bool(sts["spec"].get("volumeClaimTemplates"))
        assert has_claim == (name not in WORKERS)  # Connect keeps its state in Kafka topics
    controller = sets["us-controller"]["spec"]["template"]["spec"]["containers"][0]
    assert controller["readinessProbe"]["tcpSocket"] == {"port": 9093}
    assert controller["resources"]["limits"]["memory"] == "768Mi"  # 2 x 256m heap + 256Mi
    broker = sets["us-broker-0"]["spec"]["template"]["spec"]["containers"][0]
    # ready once the start script's rejoin check passed (no partition waits for it), then its listener
    assert broker["readinessProbe"]["exec"]["command"] == [
        "bash", "-c", f"test -f {AFTER_START_DONE} && exec 3<>/dev/tcp/{FQDN.format('us-broker-0')}/9092"]
    script = broker["command"][2]
    assert "org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server " in script
    assert f"org.apache.kafka.tools.TopicCommand --bootstrap-server {FQDN.format('us-broker-0')}:9092 --describe" in script
    assert broker["resources"]["limits"]["memory"] == "2304Mi"  # 2 x 1g heap + 256Mi
    assert {"name": "data", "mountPath": "/var/lib/kafka/data"} in broker["volumeMounts"]
    assert broker["command"][:2] == ["/bin/sh", "-c"]
    assert [e["valueFrom"]["fieldRef"]["fieldPath"] for e in broker["env"]] == ["metadata.labels['topology.kubernetes.io/zone']"]  # only the node's zone: no value, no secret  # heap, log4j and options are on the java command line
    # The probe runs in the pod: it targets the in-cluster name even with port-forward access.
    worker = sets["connect-central-0"]["spec"]["template"]["spec"]["containers"][0]
    assert f"/dev/tcp/{FQDN.format('connect-central-0')}/8083" in worker["readinessProbe"]["exec"]["command"][-1]


def test_k8s_port_forward_access(k8s_run):
    mocks, built = k8s_run
    platform = built["platform"]
    host, port = platform.host_address("connect-central-0", "rest")
    assert host == "127.0.0.1" and 10000 <= port < 30000
    assert KubernetesPlatform(STACK).host_address("connect-central-0", "rest") == (host, port)
    assert platform.port_forward_command("connect-central-0", "rest") == (
        f"kubectl port-forward --namespace {NAMESPACE} --address 127.0.0.1 service/connect-central-0 {port}:8083")
    # the MirrorMaker 2 provider opens the port-forward itself (kube_tunnel): nobody keeps one open
    assert connectors_of(mocks)["us->central-connectors"]["connect_url"] == \
        f"kube://{NAMESPACE}/service/connect-central-0:8083"


def test_k8s_in_cluster_access(k8s_in_cluster_run):
    mocks, built = k8s_in_cluster_run
    platform = built["platform"]
    rest = (FQDN.format("connect-central-0"), 8083)
    assert platform.host_address("connect-central-0", "rest") == platform.address("connect-central-0", "rest") == rest
    us = connectors_of(mocks)["us->central-connectors"]
    assert us["connect_url"] == f"http://{rest[0]}:8083"
    for config in us["connectors"].values():
        assert config["source.cluster.bootstrap.servers"] == f"{FQDN.format('us-broker-0')}:9092"


def pod_specs(built) -> dict[str, dict]:
    """StatefulSet name → its pod template."""
    return {name: sts["spec"]["template"] for name, sts in manifests_of(built, "StatefulSet").items()}


def selects(selector: dict, labels: dict) -> bool:
    return selector["matchLabels"].items() <= labels.items()


def test_k8s_pods_carry_the_labels_of_their_set(k8s_run):
    _, built = k8s_run
    pods = pod_specs(built)
    assert {k: v for k, v in pods["us-broker-0"]["metadata"]["labels"].items() if k.startswith("mirrorstack.io/")} \
        == {"mirrorstack.io/cluster": "us", "mirrorstack.io/role": "broker"}
    assert pods["uk-controller"]["metadata"]["labels"]["mirrorstack.io/role"] == "controller"
    worker = pods["connect-central-0"]["metadata"]["labels"]
    assert (worker["mirrorstack.io/role"], worker["mirrorstack.io/connect"], worker["mirrorstack.io/cluster"]) \
        == ("connect", "central", "central")  # the cluster its workers bootstrap to
    # The StatefulSets' selectors are as before (immutable): the set's labels are not in them.
    for sts in manifests_of(built, "StatefulSet").values():
        assert sts["spec"]["selector"]["matchLabels"].keys() == {"app.kubernetes.io/instance",
                                                                 "app.kubernetes.io/part-of"}


def test_k8s_one_disruption_budget_per_set_selecting_exactly_its_members(k8s_run):
    _, built = k8s_run
    budgets = manifests_of(built, "PodDisruptionBudget")
    assert set(budgets) == set(GROUPS)
    pods = pod_specs(built)
    for name, budget in budgets.items():
        assert budget["spec"]["maxUnavailable"] == 1 and "minAvailable" not in budget["spec"]
        members = {pod for pod, spec in pods.items() if selects(budget["spec"]["selector"], spec["metadata"]["labels"])}
        assert members == GROUPS[name], name


def test_k8s_disruption_budgets_come_once_per_set_after_the_namespace(k8s_run):
    mocks, _ = k8s_run
    budgets = [r for r in mocks.resources if r.typ == "kubernetes:policy/v1:PodDisruptionBudget"]
    assert len(budgets) == len(GROUPS)  # once per set, not per member
    namespace = next(r for r in mocks.resources if r.typ == "kubernetes:core/v1:Namespace")
    for budget in budgets:
        assert (namespace.typ, namespace.registered_name) in mocks.dependencies[(budget.typ, budget.registered_name)]


def test_k8s_members_of_a_set_prefer_other_nodes_and_zones(k8s_run):
    _, built = k8s_run
    for name, pod in pod_specs(built).items():
        spec, labels = pod["spec"], pod["metadata"]["labels"]
        (term,) = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
        assert "requiredDuringSchedulingIgnoredDuringExecution" not in spec["affinity"]["podAntiAffinity"]
        (spread,) = spec["topologySpreadConstraints"]
        assert (spread["topologyKey"], spread["maxSkew"], spread["whenUnsatisfiable"]) == (
            "topology.kubernetes.io/zone", 1, "ScheduleAnyway")  # a 1-node, zoneless cluster still schedules
        for selector in (term["podAffinityTerm"]["labelSelector"], spread["labelSelector"]):
            assert selects(selector, labels)  # against its own set...
            others = {n for n, p in pod_specs(built).items() if selects(selector, p["metadata"]["labels"])}
            group = next(members for members in GROUPS.values() if name in members)
            assert others == group  # ...and only its own set


def retained(mocks) -> set[str]:
    """The resources `pulumi destroy` would leave (retainOnDelete), by name in the topology."""
    return {r.name for r in mocks.resources if mocks.retain_on_delete.get((r.typ, r.registered_name))}


def test_k8s_defaults_grace_storage_and_retention(k8s_run):
    mocks, built = k8s_run
    for name, sts in manifests_of(built, "StatefulSet").items():
        assert sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 60
        if name in WORKERS:
            assert "persistentVolumeClaimRetentionPolicy" not in sts["spec"]
            continue
        (claim,) = sts["spec"]["volumeClaimTemplates"]
        assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
        assert "storageClassName" not in claim["spec"]  # the cluster's default class
        assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    # on_destroy delete: `destroy` deletes the namespace, and the claims with it
    assert not retained(mocks)


def test_k8s_grace_storage_and_retention_come_from_the_model(k8s_production_run):
    mocks, built = k8s_production_run
    for name, sts in manifests_of(built, "StatefulSet").items():
        assert sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 180
        if name not in WORKERS:
            (claim,) = sts["spec"]["volumeClaimTemplates"]
            assert claim["spec"]["resources"]["requests"]["storage"] == "50Gi"
            assert claim["spec"]["storageClassName"] == "fast-ssd"
            # Retain whatever on_destroy says: a replaced StatefulSet finds its claim again.
            assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain"
    # on_destroy retain: the namespace (holding the claims) outlives `destroy`; nothing else does
    assert retained(mocks) == {NAMESPACE}


def test_k8s_network_policy_admits_the_namespace_only_by_default(k8s_run):
    _, built = k8s_run
    (policy,) = manifests_of(built, "NetworkPolicy").values()
    assert policy["metadata"]["namespace"] == NAMESPACE
    assert policy["spec"]["podSelector"] == {}  # every pod of the stack
    assert policy["spec"]["policyTypes"] == ["Ingress"]  # egress unrestricted
    assert policy["spec"]["ingress"] == [{"from": [{"podSelector": {}}]}]


def test_k8s_network_policy_admits_the_declared_clients(k8s_production_run):
    _, built = k8s_production_run
    (policy,) = manifests_of(built, "NetworkPolicy").values()
    assert policy["spec"]["ingress"] == [{"from": [
        {"podSelector": {}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "analytics"}}},
        {"namespaceSelector": {"matchLabels": {"team": "payments"}}},
        {"ipBlock": {"cidr": "10.20.0.0/16", "except": ["10.20.5.0/24"]}}]}]


def test_k8s_network_policy_can_be_turned_off():
    topology = kubernetes_topology({"network_policy": {"enabled": False}})
    mocks, built = deploy(lambda: KubernetesPlatform(STACK, settings=topology.kubernetes), topology)
    assert not manifests_of(built, "NetworkPolicy")
    assert not mocks.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")


def test_make_platform_hands_the_kubernetes_section_to_the_platform(tmp_path):
    from mirrorstack.platforms import make_platform
    topology = kubernetes_topology(PRODUCTION)
    platform = make_platform("kubernetes", "s", local_dir=str(tmp_path), kubernetes=topology.kubernetes)
    assert platform.settings is topology.kubernetes
    assert make_platform("kubernetes", "s", local_dir=str(tmp_path)).settings.storage.size == "1Gi"


def test_k8s_rejects_unknown_rest_access():
    with pytest.raises(ValueError, match="rest_access"):
        KubernetesPlatform(STACK, rest_access="ingress")


def test_make_platform_picks_the_topology_platform(tmp_path):
    from mirrorstack.platforms import make_platform
    from mirrorstack.platforms.docker.platform import DockerPlatform
    from mirrorstack.platforms.kubernetes.platform import KubernetesPlatform
    from mirrorstack.platforms.local.platform import LocalPlatform

    assert isinstance(make_platform("local", "s", local_dir=str(tmp_path)), LocalPlatform)
    assert isinstance(make_platform("docker", "s", local_dir=str(tmp_path)), DockerPlatform)
    k8s = make_platform("kubernetes", "s", local_dir=str(tmp_path), namespace="mm2", rest_access="in-cluster")
    assert isinstance(k8s, KubernetesPlatform) and k8s.listen_host == "0.0.0.0"
    with pytest.raises(ValueError, match="'nomad' is not a registered platform, registered are 'local', 'docker' or 'kubernetes'"):
        make_platform("nomad", "s", local_dir=str(tmp_path))


# ---------------------------------------------------------------- one command line for every platform

@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("local")
    return deploy(lambda: LocalPlatform(STACK, str(folder))), folder.resolve()


def test_docker_and_kubernetes_run_the_local_platforms_command_lines(local_run, docker_run, k8s_run):
    (mocks, _), folder = local_run
    local = local_commands(mocks, folder, SERVICES)
    assert set(local) == SERVICES
    docker_side, k8s_side = container_commands(docker_run[0], k8s_run[1])
    assert docker_side == local
    assert k8s_side == local
    # The same generated files beside them (the in-network addresses aside).
    local_files = {n: set(r["files"]) for n, r in mocks.of_type(DYNAMIC).items() if n in SERVICES}
    assert {n: {u["file"].rsplit("/", 1)[1] for u in c["uploads"]} for n, c in containers(docker_run[0]).items()} \
        == local_files
    assert {n.removesuffix("-files"): set(m["data"]) for n, m in manifests_of(k8s_run[1], "ConfigMap").items()
            if n.removesuffix("-files") in SERVICES} == local_files


def test_jvm_options_reach_every_jvm_of_their_cluster_or_group_on_every_platform(tmp_path):
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.aggregation.yaml").read_text())["config"]
    topology = document["mirrorstack:topology"]
    topology["clusters"]["us"]["resources"] = {"jvm_options": ["-XX:TieredStopAtLevel=1"]}
    topology["connect"] = {"connect-central": {"kafka": "central", "resources": {"jvm_options": ["-XX:+UseSerialGC"]}}}
    for flow in topology["flows"]:
        flow["connect"] = "connect-central"
    platforms = {"local": lambda: LocalPlatform(STACK, str(tmp_path)), "docker": lambda: DockerPlatform(STACK),
                 "kubernetes": lambda: KubernetesPlatform(STACK)}
    for name, platform in platforms.items():
        mocks, built = deploy(platform, load_topology(topology))
        if name == "kubernetes":
            lines = {n: script_commands(s["spec"]["template"]["spec"]["containers"][0]["command"][2])["service"]
                     for n, s in manifests_of(built, "StatefulSet").items()}
        elif name == "docker":
            lines = {n: c["service"] for n, c in container_commands(mocks, {"manifests": []})[0].items()}
        else:
            lines = {n: r["argv"] for n, r in mocks.of_type(DYNAMIC).items() if "argv" in r}
        with_options = {n for n, argv in lines.items() if "-XX:TieredStopAtLevel=1" in argv}
        assert with_options == {"us-controller", "us-broker-0"}, (name, lines)
        workers = [argv for n, argv in lines.items() if "connect-central" in n and not n.startswith("supervisor-")]
        assert len(workers) == 1, (name, sorted(lines))
        worker = workers[0]
        assert "-XX:+UseSerialGC" in worker and "-XX:+UseG1GC" not in worker
