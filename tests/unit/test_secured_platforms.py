"""The `secure` stack (SASL_SSL clusters: SCRAM on edge, PLAIN + mTLS on
central; Connect with REST basic auth) on docker and kubernetes under Pulumi
mocks. The mocked certificates and passwords are recognisable fakes
(test_platforms_mocked.fake_generated), so the tests can follow them: they
must only ever be in Pulumi secrets, 0600 uploads and Kubernetes Secrets."""
from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from mirrorstack.connect import readiness
from mirrorstack.kafka import sasl_check
from mirrorstack.model.spec import load_topology
from mirrorstack.platforms.containers import AFTER_START_DONE, container_script, probe_command
from mirrorstack.platforms.descriptions import CHECK, ONCE_HEALTHY, check_of_kind, once_healthy_checks
from mirrorstack.platforms.docker.platform import DockerPlatform
from mirrorstack.platforms.kubernetes.manifests import KUBERNETES_VERSION
from mirrorstack.platforms.kubernetes.platform import KubernetesPlatform
from mirrorstack.platforms.local.platform import LocalPlatform
from mirrorstack.validation.continuous import SERVICE
from tests.support.http_stand_in import serve
from tests.support.mocked_runs import assert_ships_the_job_package, connectors_of, container_commands, local_commands
from tests.support.pulumi_mocks import (
    DYNAMIC, FAKE_KEY_MARK, FAKE_PASSWORD_MARK, SECRET_SIG, deploy, holds_secret_text, ints, leaks,
)
from tests.support.stacks import on_platform

STACK = "secure"
ROOT = Path(__file__).resolve().parents[2]
NODES = {"edge-controller", "edge-broker-0", "central-controller", "central-broker-0"}
WORKER = "connect-central-0"
SERVICES = NODES | {WORKER}
JOB = "validation-job"
VALIDATOR = SERVICE  # the continuous validator
CLIENTS = "/etc/mirrorstack/clients"
EXECUTOR_PODS_MASTER = "k8s://https://kubernetes.default.svc"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"


# Connect's /health answers (KIP-1017), for the REST stand-ins below
HEALTHY = '{"status":"healthy","message":"Worker has completed startup and is ready to handle requests."}'
STARTING = '{"status":"starting","message":"Worker is still starting up."}'


def service_line(script: str) -> list[str]:
    """The service's java command line in a start script (`exec ...` or `... &`)."""
    (line,) = [line for line in script.replace(" && ", "\n").splitlines()
               if line.startswith("exec java ") or (line.startswith("java ") and line.endswith(" &"))]
    return shlex.split(line.removeprefix("exec ").removesuffix(" &"))


def internal_port(platform, service: str) -> int:
    return platform.address(service, "internal")[1]


def secure_topology(platform: str, continuous: bool = False):
    """The secure stack on `platform`; `continuous`: with the continuous validator beside the one-shot job
    (on kubernetes both with executor pods, which read the clusters too)."""
    document = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text())
    topology = on_platform(document["config"]["mirrorstack:topology"], platform)
    # On kubernetes the validation job needs a Spark image with the spark-sql-kafka jars (not apache/spark).
    images = {"spark": "registry.example.com/mirrorstack/spark:1"} if platform == "kubernetes" else {}
    if continuous:
        topology["validation"] = {**topology.get("validation", {}), "mode": "both", **(
            {"master": EXECUTOR_PODS_MASTER, "executor_instances": 1} if platform == "kubernetes" else {})}
    return load_topology({**topology, "images": images})


def folder(service: str) -> str:
    return f"/opt/mirrorstack/{service}"


# ---------------------------------------------------------------- docker

@pytest.fixture(scope="module")
def docker_secure():
    return deploy(lambda: DockerPlatform(STACK), topology=secure_topology("docker", continuous=True), stack=STACK)


def docker_containers(mocks) -> dict[str, dict]:
    return mocks.of_type("docker:index/container:Container")


def uploads_of(container: dict) -> dict[str, dict]:
    """file → upload entry; the uploads are a secret as a whole when any content is."""
    return {u["file"]: u for u in ints(container["uploads"])}


def test_docker_nothing_secret_outside_pulumi_secrets(docker_secure):
    mocks, _ = docker_secure
    assert leaks(mocks) == []
    for name, container in docker_containers(mocks).items():
        for field in ("command", "envs", "healthcheck", "labels", "entrypoints"):
            assert not holds_secret_text(ints(container.get(field))), (name, field)


def test_docker_secret_files_are_secret_0600_uploads_of_the_image_user(docker_secure):
    mocks, _ = docker_secure
    containers = docker_containers(mocks)
    for service in SERVICES:
        container = containers[service]
        assert SECRET_SIG in container["uploads"], service  # the content is a secret in state
        uploads = uploads_of(container)
        for path, entry in uploads.items():
            secret_place = path.startswith(f"{folder(service)}/secrets/") or path.startswith(f"{CLIENTS}/")
            assert secret_place == (entry.get("permissions") == "0600"), path
            if secret_place:
                assert (entry["owner"], entry["group"]) == ("1000", "1000"), path
            else:  # plain files (configs, log4j) hold no key or password
                assert not holds_secret_text(entry.get("content")), path
    for node in NODES:
        uploads = uploads_of(containers[node])
        assert FAKE_KEY_MARK in uploads[f"{folder(node)}/secrets/server.pem"]["content"]
        assert f"FAKE-{node.upper()}-KEY-" in uploads[f"{folder(node)}/secrets/server.pem"]["content"]  # its own
        assert "FAKE-CA-" in uploads[f"{folder(node)}/secrets/ca.pem"]["content"]
    scram = uploads_of(containers["edge-broker-0"])[f"{folder('edge-broker-0')}/secrets/scram.properties"]["content"]
    assert scram.startswith(f"SCRAM-SHA-256=iterations=8192,password={FAKE_PASSWORD_MARK}")
    plain = uploads_of(containers["central-broker-0"])[f"{folder('central-broker-0')}/secrets/broker.properties"]
    assert FAKE_PASSWORD_MARK in plain["content"] and "PlainLoginModule" in plain["content"]


def test_docker_connect_gets_the_client_folders_and_its_own_copy(docker_secure):
    mocks, built = docker_secure
    platform = built["platform"]
    assert platform.client_dir("edge") == f"{CLIENTS}/edge"
    uploads = uploads_of(docker_containers(mocks)[WORKER])
    clients = {path for path in uploads if path.startswith(f"{CLIENTS}/")}
    assert clients == {f"{CLIENTS}/edge/ca.pem", f"{CLIENTS}/edge/client.properties",  # SCRAM: no client key
                       f"{CLIENTS}/central/ca.pem", f"{CLIENTS}/central/client.pem",  # mTLS
                       f"{CLIENTS}/central/client.properties"}
    assert FAKE_KEY_MARK in uploads[f"{CLIENTS}/central/client.pem"]["content"]
    assert FAKE_PASSWORD_MARK in uploads[f"{CLIENTS}/edge/client.properties"]["content"]
    # Its own cluster's client files (the worker's clients), and the REST credentials.
    own = {p.removeprefix(f"{folder(WORKER)}/") for p in uploads if p.startswith(f"{folder(WORKER)}/secrets/")}
    assert own == {"secrets/ca.pem", "secrets/client.pem", "secrets/client.properties",
                   "secrets/rest-credentials.properties"}
    worker = uploads[f"{folder(WORKER)}/worker.properties"]["content"]
    assert f"config.providers.file.param.allowed.paths={CLIENTS}/edge,{CLIENTS}/central," in worker
    # The connectors reference the client folders; no secret in their configs.
    for config in connectors_of(mocks)["edge->central-connectors"]["connectors"].values():
        assert config["source.cluster.sasl.jaas.config"] == f"${{file:{CLIENTS}/edge/client.properties:sasl.jaas.config}}"
        assert config["target.cluster.ssl.keystore.location"] == f"{CLIENTS}/central/client.pem"


def test_docker_connect_rest_auth_options_and_probe(docker_secure):
    mocks, _ = docker_secure
    worker = docker_containers(mocks)[WORKER]
    java = service_line(worker["command"][0])
    jaas = f"-Djava.security.auth.login.config={folder(WORKER)}/rest-jaas.conf"
    assert java.index(jaas) < java.index("-cp") and not worker.get("envs")  # a JVM option, no KAFKA_OPTS
    probe = worker["healthcheck"]["tests"][-1]
    assert f"< {folder(WORKER)}/secrets/rest-credentials.properties" in probe
    assert "Authorization: Basic %s" in probe and "/health" in probe and "/connector-plugins" in probe


@pytest.mark.parametrize("health, healthy", [((200, HEALTHY), True), ((503, STARTING), False)])
def test_a_connect_container_is_healthy_only_once_connect_says_so(tmp_path, health, healthy):
    """The container probe (docker's healthcheck, kubernetes's readinessProbe) asks `/health` before the
    plugins: a worker still reading its group's internal topics answers the plugins already."""
    from mirrorstack.platforms.containers import probe_command
    plugins = '[{"class":"org.apache.kafka.connect.mirror.MirrorSourceConnector"}]'
    server, seen = serve(lambda path: health if path == "/health" else (200, plugins))
    try:
        credentials = tmp_path / "rest-credentials"
        credentials.write_text("admin: s3cret\n")
        spec = {"kind": "connect", "url": f"http://127.0.0.1:{server.server_address[1]}",
                "auth_file": str(credentials)}
        done = subprocess.run(probe_command(spec, lambda host, port: (host, port)), capture_output=True,
                              text=True, timeout=30)
        assert (done.returncode == 0) is healthy, done.stderr
        assert seen[0] == ("/health", "Basic YWRtaW46czNjcmV0")
    finally:
        server.shutdown()


def test_docker_scram_broker_creates_its_user_after_the_start(docker_secure):
    mocks, built = docker_secure
    containers = docker_containers(mocks)
    (script,) = containers["edge-broker-0"]["command"]
    lines = script.splitlines()
    (start,) = [i for i, line in enumerate(lines) if line.endswith(" &")]
    assert service_line(script)[-2:] == ["kafka.Kafka", f"{folder('edge-broker-0')}/server.properties"]
    step = next(i for i, line in enumerate(lines) if CONFIG_COMMAND in line)
    assert "kafka.tools.StorageTool format" in script.split(" &\n")[0]  # formatted before the start
    assert start < step < lines.index('wait "$pid"; status=$?')
    assert lines[step].startswith("until ")  # retried until the broker takes it
    assert f"--add-config-file {folder('edge-broker-0')}/secrets/scram.properties" in lines[step]
    assert f"--command-config {folder('edge-broker-0')}/admin.properties" in lines[step]
    assert " java -Xmx256m -XX:+UseSerialGC " in lines[step]  # a short-lived tool's java command line
    assert "trap 'stopping=1; kill -TERM \"$pid\" 2>/dev/null' TERM INT" in lines[start + 1:step]
    assert f"touch {AFTER_START_DONE}" in script and "exec " not in script
    # Healthy only after the step, once the INTERNAL (TLS) listener accepts: no JVM, no client settings.
    port = internal_port(built["platform"], "edge-broker-0")
    assert containers["edge-broker-0"]["healthcheck"]["tests"] == [
        "CMD", "bash", "-c", f"test -f {AFTER_START_DONE} && exec 3<>/dev/tcp/edge-broker-0/{port}"]
    assert not any(path.endswith("health-client.properties") for path in uploads_of(containers["edge-broker-0"]))
    # PLAIN (central) has nothing to do after the start: the service is exec'd as before.
    (plain,) = containers["central-broker-0"]["command"]
    assert plain.split(" && ")[-1].startswith("exec java ")
    assert service_line(plain)[-2:] == ["kafka.Kafka", f"{folder('central-broker-0')}/server.properties"]
    port = internal_port(built["platform"], "central-broker-0")
    assert containers["central-broker-0"]["healthcheck"]["tests"] == [
        "CMD", "bash", "-c", f"exec 3<>/dev/tcp/central-broker-0/{port}"]


def test_docker_validation_job_gets_the_client_folders(docker_secure):
    mocks, _ = docker_secure
    job = docker_containers(mocks)[JOB]
    assert SECRET_SIG in job["uploads"]
    uploads = uploads_of(job)
    clients = {p: u for p, u in uploads.items() if p.startswith(f"{CLIENTS}/")}
    assert set(clients) == {f"{CLIENTS}/edge/ca.pem", f"{CLIENTS}/edge/client.properties", f"{CLIENTS}/central/ca.pem",
                            f"{CLIENTS}/central/client.pem", f"{CLIENTS}/central/client.properties"}
    assert all((u["owner"], u["permissions"]) == ("185", "0600") for u in clients.values())  # the spark user
    flows = json.loads(uploads["/opt/mirrorstack/validation/flows.json"]["content"])["flows"]
    assert flows[0]["source_client"]["ssl.truststore.location"] == f"{CLIENTS}/edge/ca.pem"
    assert not holds_secret_text(flows)
    assert_ships_the_job_package("docker", *docker_secure)  # beside the secret uploads


def test_docker_continuous_validator_gets_the_client_folders(docker_secure):
    mocks, _ = docker_secure
    validator = docker_containers(mocks)[VALIDATOR]
    assert SECRET_SIG in validator["uploads"]
    clients = {p: u for p, u in uploads_of(validator).items() if p.startswith(f"{CLIENTS}/")}
    assert {p.rsplit("/", 2)[1] for p in clients} == {"edge", "central"}
    assert all((u["owner"], u["permissions"]) == ("185", "0600") for u in clients.values())  # the spark user


# ---------------------------------------------------------------- kubernetes

@pytest.fixture(scope="module")
def k8s_secure():
    return deploy(lambda: KubernetesPlatform(STACK), topology=secure_topology("kubernetes", continuous=True),
                  stack=STACK)


def manifests(built, kind: str) -> dict[str, dict]:
    return {m["metadata"]["name"]: m for m in built["manifests"] if m["kind"] == kind}


def test_each_node_has_a_certificate_for_its_own_hosts(docker_secure):
    mocks, _ = docker_secure
    platform = DockerPlatform(STACK)
    certs = {r.inputs["cluster"]: r.inputs for r in mocks.resources if "nodes" in (r.inputs or {})}
    assert set(certs) == {"edge", "central"}
    for alias, inputs in certs.items():
        assert set(inputs["nodes"]) == {n for n in NODES if n.startswith(f"{alias}-")}
        for node, hosts in inputs["nodes"].items():
            port = "controller" if node.endswith("controller") else "kafka"
            assert platform.address(node, port)[0] in hosts and "localhost" in hosts
            assert not {platform.address(other, "kafka")[0] for other in NODES if other != node} & set(hosts)
        assert (inputs["validity_days"], inputs["renew_before_days"], inputs["ca_generation"]) == (365, 30, 1)


def pod_of(built, service: str) -> dict:
    return manifests(built, "StatefulSet")[service]["spec"]["template"]


def test_k8s_secrets_are_secret_objects_never_configmaps(k8s_secure):
    mocks, built = k8s_secure
    assert leaks(mocks) == []
    secrets = manifests(built, "Secret")
    # + the REST credentials of the Connect group's self-healing supervisor
    assert set(secrets) == {f"{s}-secrets" for s in [*SERVICES, "supervisor-central"]} | {
        "edge-client", "central-client", f"{JOB}-flows"}
    for registered in (r for r in mocks.resources if r.typ == "kubernetes:core/v1:Secret"):
        assert SECRET_SIG in registered.inputs["stringData"], registered.name  # secret in state too
    for name, config_map in manifests(built, "ConfigMap").items():
        assert not holds_secret_text(config_map), name
    holders = {(m["kind"], m["metadata"]["name"]) for m in built["manifests"] if holds_secret_text(m)}
    assert holders == {("Secret", f"{s}-secrets") for s in [*SERVICES, "supervisor-central"]} | {
        ("Secret", "edge-client"), ("Secret", "central-client")}
    assert set(secrets["edge-broker-0-secrets"]["stringData"]) == {"server.pem", "ca.pem", "scram.properties"}
    assert set(secrets["central-broker-0-secrets"]["stringData"]) == {"server.pem", "ca.pem", "broker.properties"}
    assert set(secrets["edge-controller-secrets"]["stringData"]) == {"server.pem", "ca.pem"}
    assert set(secrets["central-client"]["stringData"]) == {"ca.pem", "client.pem", "client.properties"}
    assert set(secrets["edge-client"]["stringData"]) == {"ca.pem", "client.properties"}


def test_k8s_nodes_mount_their_secret_at_secrets(k8s_secure):
    _, built = k8s_secure
    for service in SERVICES:
        pod = pod_of(built, service)
        (container,) = pod["spec"]["containers"]
        assert {"name": "secrets", "secret": {"secretName": f"{service}-secrets", "defaultMode": 0o400}} \
            in pod["spec"]["volumes"]
        assert {"name": "secrets", "mountPath": f"{folder(service)}/secrets", "readOnly": True} \
            in container["volumeMounts"]
        assert pod["spec"]["securityContext"]["fsGroup"] == 1000  # 0400 + fsGroup: readable by appuser only
        assert pod["metadata"]["annotations"]["mirrorstack.io/secrets-version"] is not None  # restart on rotation
        assert not holds_secret_text(container)


def test_k8s_connect_mounts_the_client_secrets_at_client_dir(k8s_secure):
    _, built = k8s_secure
    pod = pod_of(built, WORKER)
    (container,) = pod["spec"]["containers"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    for alias in ("edge", "central"):
        assert built["platform"].client_dir(alias) == f"{CLIENTS}/{alias}"
        volume = volumes[mounts[f"{CLIENTS}/{alias}"]]
        assert volume["secret"] == {"secretName": f"{alias}-client", "defaultMode": 0o400}
    assert f"-Djava.security.auth.login.config={folder(WORKER)}/rest-jaas.conf" in service_line(container["command"][2])
    assert [e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]] == ["metadata.labels['topology.kubernetes.io/zone']"]  # only the node's zone: no value, no secret
    probe = container["readinessProbe"]["exec"]["command"][-1]
    assert f"{folder(WORKER)}/secrets/rest-credentials.properties" in probe


def test_k8s_scram_broker_script_and_probe(k8s_secure):
    _, built = k8s_secure
    (broker,) = pod_of(built, "edge-broker-0")["spec"]["containers"]
    assert broker["command"][:2] == ["/bin/sh", "-c"]
    script = broker["command"][2]
    assert script.index(f"kafka.Kafka {folder('edge-broker-0')}/server.properties &") < script.index(CONFIG_COMMAND)
    assert script.index(CONFIG_COMMAND) < script.index('wait "$pid"')
    probe = broker["readinessProbe"]["exec"]["command"]
    internal_host = f"edge-broker-0.mirrorstack-{STACK}.svc.cluster.local"
    port = internal_port(built["platform"], "edge-broker-0")
    assert probe == ["bash", "-c", f"test -f {AFTER_START_DONE} && exec 3<>/dev/tcp/{internal_host}/{port}"]
    files = manifests(built, "ConfigMap")["edge-broker-0-files"]["data"]
    assert set(files) == {"server.properties", "admin.properties", "log4j2.properties", "ready-check.properties"}
    # the rejoin check's tools use the node's own certificate on INTERNAL, as the probe does
    check = files["ready-check.properties"].splitlines()
    assert "security.protocol=SSL" in check and "ssl.keystore.type=PEM" in check
    assert f"--command-config /opt/mirrorstack/edge-broker-0/ready-check.properties" in broker["command"][2]
    # Without after-start steps (PLAIN on central) the rejoin check alone gates the INTERNAL port.
    (central,) = pod_of(built, "central-broker-0")["spec"]["containers"]
    central_host = f"central-broker-0.mirrorstack-{STACK}.svc.cluster.local"
    assert central["readinessProbe"]["exec"]["command"][-1] == (
        f"test -f {AFTER_START_DONE} && exec 3<>/dev/tcp/{central_host}/{internal_port(built['platform'], 'central-broker-0')}")
    # The controller keeps the kubelet's TCP check; the internal port is listed on the broker.
    (controller,) = pod_of(built, "edge-controller")["spec"]["containers"]
    assert "tcpSocket" in controller["readinessProbe"]
    ports = {p["name"] for p in manifests(built, "Service")["edge-broker-0"]["spec"]["ports"]}
    assert {"kafka", "internal"} <= ports


def test_k8s_validation_job_mounts_the_client_secrets(k8s_secure):
    _, built = k8s_secure
    pod = manifests(built, "Job")[JOB]["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    for alias in ("edge", "central"):
        assert volumes[mounts[f"{CLIENTS}/{alias}"]]["secret"]["secretName"] == f"{alias}-client"
    assert pod["spec"]["securityContext"]["fsGroup"] == 185  # the spark user reads the 0400 files
    assert_ships_the_job_package("kubernetes", *k8s_secure)


def test_k8s_continuous_validator_and_its_executors_mount_the_client_secrets(k8s_secure):
    _, built = k8s_secure
    pod = manifests(built, "Deployment")[VALIDATOR]["spec"]["template"]["spec"]
    template = json.loads(next(text for key, text in manifests(built, "ConfigMap")[f"{VALIDATOR}-files"]["data"].items()
                               if key.endswith("executor-pod.json")))["spec"]
    for spec in (pod, template):
        (container,) = spec["containers"]
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        for alias in ("edge", "central"):
            assert volumes[mounts[f"{CLIENTS}/{alias}"]]["secret"]["secretName"] == f"{alias}-client"
        assert spec["securityContext"]["fsGroup"] == 185


@pytest.mark.parametrize("version", [KUBERNETES_VERSION, kubernetes_validate.latest_version()])
def test_k8s_secure_manifests_validate_strictly(k8s_secure, version):
    _, built = k8s_secure
    for manifest in built["manifests"]:
        kubernetes_validate.validate(manifest, desired_version=version, strict=True)


# ---------------------------------------------------------------- one command line for every platform

def test_containers_run_the_local_command_lines_with_after_start_steps_and_jvm_options(
        tmp_path_factory, docker_secure, k8s_secure):
    folder = tmp_path_factory.mktemp("local-secure").resolve()
    mocks, built = deploy(lambda: LocalPlatform(STACK, str(folder)), topology=secure_topology("local"), stack=STACK)
    docker_side, k8s_side = container_commands(docker_secure[0], k8s_secure[1])
    # The after-start step names the broker's address: each platform's own.
    as_docker = local_commands(mocks, folder, SERVICES, built["platform"], docker_secure[1]["platform"])
    as_k8s = local_commands(mocks, folder, SERVICES, built["platform"], k8s_secure[1]["platform"])
    (step,) = as_docker["edge-broker-0"]["after_start"]  # the SCRAM user
    assert step[step.index("--bootstrap-server") + 1] == "edge-broker-0:%d" % docker_secure[1]["platform"].address(
        "edge-broker-0", "internal")[1]
    assert any(a.startswith("-Djava.security.auth.login.config=") for a in as_docker[WORKER]["service"])
    assert docker_side == as_docker
    assert k8s_side == as_k8s


def test_local_secured_brokers_check_the_stacks_sasl_users_on_their_client_listener(tmp_path_factory):
    """Each SASL broker's readiness names its CLIENT listener and how to reach it (no password);
    its `health_secrets`, a Pulumi secret, hold the stack's own user and the cluster's principals."""
    folder = tmp_path_factory.mktemp("local-sasl").resolve()
    mocks, built = deploy(lambda: LocalPlatform(STACK, str(folder)), topology=secure_topology("local"), stack=STACK)
    services = mocks.of_type("pulumi-python:dynamic/local:LocalService")
    expected = {"edge-broker-0": ("SCRAM-SHA-256", {"mirrorstack", "orders-app", "newcomer-edge"}),
                "central-broker-0": ("PLAIN", {"mirrorstack", "reports-app", "newcomer-central"})}
    for name, (mechanism, users) in expected.items():
        health, secrets = services[name]["health"], services[name]["health_secrets"]
        assert health["sasl.bootstrap"] == "127.0.0.1:%d" % built["platform"].address(name, "kafka")[1]
        assert health["sasl.client.sasl.mechanism"] == mechanism
        assert SECRET_SIG in secrets and set(secrets["value"]) == users
        assert not holds_secret_text(health)
    assert services["central-broker-0"]["health"]["sasl.client.ssl.certificate.location"].endswith("/server.pem")
    assert "health_secrets" not in services["edge-controller"]
    # the checks are kafka/'s and connect/'s own, found through entry points by the platform (it
    # imports neither); the health specs hold no reference, so a stack deployed before they moved
    # sees no change
    broker, worker = services["edge-broker-0"]["health"], services["connect-central-0"]["health"]
    assert once_healthy_checks(broker) == [sasl_check.wait_accepted]
    assert check_of_kind(worker["kind"]) is readiness.check
    assert not ({CHECK, ONCE_HEALTHY} & (set(broker) | set(worker)))
    assert once_healthy_checks(services["edge-controller"]["health"]) == []


# ---------------------------------------------------------------- shared helpers

HEALTH = {"kind": "kafka", "bootstrap": "b:9100", "brokers": "1", "client.security.protocol": "ssl",
          "client.ssl.ca.location": "/x/secrets/ca.pem", "client.ssl.certificate.location": "/x/secrets/server.pem",
          "client.ssl.key.location": "/x/secrets/server.pem"}


def test_a_kafka_health_check_in_a_container_is_a_tcp_connect():
    """Secured or not, the listener accepting is the sign (no JVM, so no client settings)."""
    assert probe_command(HEALTH, lambda h, p: (f"{h}.ns", p + 1)) == ["bash", "-c", "exec 3<>/dev/tcp/b.ns/9101"]
    assert probe_command(HEALTH, lambda h, p: (h, p), ready_file="/tmp/ready") == [
        "bash", "-c", "test -f /tmp/ready && exec 3<>/dev/tcp/b/9100"]


def test_script_without_after_start_prepares_then_execs():
    script = container_script(["java", "-cp", "/l/*", "kafka.Kafka", "/d/server.properties"],
                              [["java", "-cp", "/l/*", "kafka.tools.StorageTool", "format"]])
    assert script == ("java -cp '/l/*' kafka.tools.StorageTool format"
                      " && exec java -cp '/l/*' kafka.Kafka /d/server.properties")


BROKERS_OUT = """b-0.ns:9092 (id: 1 rack: zone-a isFenced: false) -> (
\tProduce(0): 0 to 12 [usable: 12],
)
b-1.ns:9092 (id: 2 rack: zone-a isFenced: false) -> (
)
"""


def _partition(leader: str, replicas: str, isr: str, extra: str = "") -> str:
    return f"\tTopic: orders\tTopicId: x\tPartition: 0\tLeader: {leader}\tReplicas: {replicas}\tIsr: {isr}{extra}\tElr: \tLastKnownElr: "


@pytest.mark.parametrize("node, describe, ready", [
    ("2", [_partition("1", "1,2", "1,2")], True),
    ("2", [_partition("1", "1,2", "1")], False),  # this broker still catching up
    ("1", [_partition("1", "1,3", "1")], True),  # broker 3 is down: its replica does not hold the roll
    ("3", [_partition("1", "1,2", "1,2")], False),  # not registered yet
    ("2", [_partition("none", "1,2", "2")], False),  # a live replica in the ISR but no leader yet
    ("2", [_partition("none", "3", "3")], True),  # offline only because broker 3 is down
    ("2", [_partition("1", "1,2", "1,2", "\tAdding Replicas: 3\tRemoving Replicas: 2"), _partition("2", "2,1", "2")], False),
])
def test_the_rejoined_check_is_the_local_platforms_rule_in_posix_sh(tmp_path, node, describe, ready):
    from mirrorstack.platforms.containers import rejoined_check
    brokers, topics = tmp_path / "brokers", tmp_path / "topics"
    (tmp_path / "brokers.out").write_text(BROKERS_OUT)
    (tmp_path / "topics.out").write_text("Topic: orders\tPartitionCount: 1\n" + "\n".join(describe) + "\n")
    for tool, out in ((brokers, "brokers.out"), (topics, "topics.out")):
        tool.write_text(f"#!/bin/sh\ncat {tmp_path / out}\n")
        tool.chmod(0o755)
    check = rejoined_check(node, [str(brokers)], [str(topics)])
    done = subprocess.run(["dash", "-c", f"({check})"], capture_output=True, text=True)
    assert (done.returncode == 0) is ready, done.stderr


def test_the_rejoined_check_fails_when_kafka_does_not_answer(tmp_path):
    from mirrorstack.platforms.containers import rejoined_check
    check = rejoined_check("1", ["false"], ["false"])
    assert subprocess.run(["dash", "-c", f"({check})"]).returncode != 0


def _serve(body: str, status: int = 200, health: tuple[int, str] = (200, HEALTHY)):
    """Connect's REST API stand-in: `/health` answers `health`, every other GET `body`."""
    return serve(lambda path: health if path == "/health" else (status, body))


def _status(*states: str) -> str:
    tasks = ",".join(f'{{"id":{i},"state":"{s}","worker_id":"w:8083"}}' for i, s in enumerate(states[1:]))
    return ('{"us->central.MirrorSourceConnector":{"status":{"name":"x","connector":{"state":"%s","worker_id":"w"},'
            '"tasks":[%s],"type":"source"}}}' % (states[0], tasks))


@pytest.mark.parametrize("body, status, health, ready", [
    ("{}", 200, (200, HEALTHY), True),  # a group without connectors
    # a worker still reading its internal topics lists no connectors either (a roll, 2026-11-29)
    ("{}", 200, (503, STARTING), False),
    (_status("RUNNING", "RUNNING", "RUNNING"), 200, (200, HEALTHY), True),
    (_status("STOPPED"), 200, (200, HEALTHY), True),  # stopped on purpose (failover)
    (_status("RUNNING", "RUNNING", "UNASSIGNED"), 200, (200, HEALTHY), False),  # the group still rebalancing
    (_status("RUNNING", "FAILED"), 200, (200, HEALTHY), False),
    ("", 409, (200, HEALTHY), False),  # rebalancing: Connect refuses the request
])
def test_a_worker_is_ready_once_its_group_runs_every_task(tmp_path, body, status, health, ready):
    from mirrorstack.platforms.containers import tasks_running_check
    server, seen = _serve(body, status, health)
    try:
        credentials = tmp_path / "rest-credentials"
        credentials.write_text("admin: s3cret\n")
        check = tasks_running_check("127.0.0.1", server.server_address[1], str(credentials))
        done = subprocess.run(["dash", "-c", f"({check})"], capture_output=True, text=True, timeout=30)
        assert (done.returncode == 0) is ready, done.stderr
        assert seen[0] == ("/health", "Basic YWRtaW46czNjcmV0")
        assert [path for path, _ in seen] == ["/health"] + (["/connectors?expand=status"] if health[0] == 200 else [])
        assert "s3cret" not in check  # the password is read when the check runs
    finally:
        server.shutdown()


# ---------------------------------------------------------------- the self-healing supervisor

SUPERVISOR = "supervisor-central"
SUPERVISOR_ARGV = ["python3", "-B", "-m", "mirrorstack.connect.supervisor", f"{folder(SUPERVISOR)}/config.json"]


def test_every_platform_runs_the_groups_supervisor_with_its_rest_credentials_only_in_a_secret(
        tmp_path_factory, docker_secure, k8s_secure):
    """One supervisor per deployed Connect group: the same module and config on
    every platform, the workers as it reaches them, the REST password only in
    a 0600 file / a Secret, the modules it imports shipped as source."""
    # docker: the spark image (python3), its code and config uploaded, the secret 0600 for its user
    supervisor = docker_containers(docker_secure[0])[SUPERVISOR]
    assert supervisor["command"] == SUPERVISOR_ARGV and supervisor["restart"] == "unless-stopped"
    assert f"PYTHONPATH={folder(SUPERVISOR)}/code" in supervisor["envs"]
    uploads = uploads_of(supervisor)
    config = json.loads(uploads[f"{folder(SUPERVISOR)}/config.json"]["content"])
    assert config["urls"] == ["http://connect-central-0:8083"] and config["listen"] == "0.0.0.0:9405"
    assert set(config["connectors"].values()) == {"running"} and len(config["connectors"]) == 3
    secret = uploads[f"{folder(SUPERVISOR)}/secrets/config.json"]
    assert (secret["permissions"], secret["owner"]) == ("0600", "185") and config["secrets_file"] == secret["file"]
    assert FAKE_PASSWORD_MARK in secret["content"] and FAKE_PASSWORD_MARK not in json.dumps(config)
    shipped = {f.removeprefix(f"{folder(SUPERVISOR)}/code/") for f in uploads if "/code/" in f}
    assert shipped == {"mirrorstack/__init__.py", "mirrorstack/connect/__init__.py", "mirrorstack/platforms/__init__.py",
                       "mirrorstack/connect/supervisor.py", "mirrorstack/connect/healing.py",
                       "mirrorstack/connect/api.py", "mirrorstack/platforms/tunnels.py",
                       "mirrorstack/platforms/kubernetes/__init__.py", "mirrorstack/platforms/kubernetes/tunnel.py",
                       "mirrorstack/platforms/docker/__init__.py", "mirrorstack/platforms/docker/tunnel.py"}
    assert uploads[f"{folder(SUPERVISOR)}/code/mirrorstack/__init__.py"]["content"] == ""  # not the real package
    # kubernetes: a Deployment, the password in a Secret mounted read-only 0400
    built = k8s_secure[1]
    pod = manifests(built, "Deployment")[SUPERVISOR]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == SUPERVISOR_ARGV and pod["securityContext"]["runAsUser"] == 185
    assert container["workingDir"] == f"{folder(SUPERVISOR)}/code" and not container["env"]  # `-m` finds it there
    assert {"name": "secrets", "secret": {"secretName": f"{SUPERVISOR}-secrets", "defaultMode": 0o400}} in pod["volumes"]
    assert FAKE_PASSWORD_MARK in json.dumps(manifests(built, "Secret")[f"{SUPERVISOR}-secrets"])
    files = manifests(built, "ConfigMap")[f"{SUPERVISOR}-files"]["data"]
    assert json.loads(files["config.json"])["urls"] == [
        "http://connect-central-0.mirrorstack-secure.svc.cluster.local:8083"]
    assert "def decide(" in files["code__mirrorstack__connect__healing.py"]  # mounted at code/mirrorstack/connect/
    # local: this project's python, the secret file 0600 beside the config
    folder_ = tmp_path_factory.mktemp("local-supervisor").resolve()
    mocks, _ = deploy(lambda: LocalPlatform(STACK, str(folder_)), topology=secure_topology("local"), stack=STACK)
    local = mocks.of_type("pulumi-python:dynamic")[SUPERVISOR]
    assert local["argv"][1:] == ["-m", "mirrorstack.connect.supervisor", f"{folder_}/{SUPERVISOR}/config.json"]
    assert FAKE_PASSWORD_MARK in json.dumps(local["secret_files"])
    assert FAKE_PASSWORD_MARK not in json.dumps(local["files"])


def test_docker_acls_reach_every_broker_at_its_published_admin_listener(docker_secure):
    """The ACL resource runs where `up` runs: each broker advertises an ADMIN listener
    (TLS, node certificates only) at its port published on 127.0.0.1, whose address its
    certificate names; INTERNAL stays unpublished and advertised by container name."""
    mocks, built = docker_secure
    containers = docker_containers(mocks)
    dynamic = {r.name: r.inputs for r in mocks.resources if r.typ.startswith("pulumi-python:dynamic")}
    for alias in ("edge", "central"):
        broker = f"{alias}-broker-0"
        container = containers[broker]
        (published,) = ints([p for p in container["ports"] if p["ip"] == "127.0.0.1"
                              and p["internal"] == built["platform"].address(broker, "admin")[1]])
        props = dict(line.split("=", 1) for line in uploads_of(container)[f"{folder(broker)}/server.properties"][
            "content"].splitlines() if "=" in line and not line.startswith("#"))
        assert f"ADMIN://127.0.0.1:{published['external']}" in props["advertised.listeners"]
        assert f"ADMIN://0.0.0.0:{published['internal']}" in props["listeners"]
        assert "ADMIN:SSL" in props["listener.security.protocol.map"] and props["ssl.client.auth"] == "required"
        assert f"INTERNAL://{broker}:" in props["advertised.listeners"]
        assert dynamic[f"{alias}-acls"]["bootstrap"] == f"127.0.0.1:{published['external']}"
        assert "127.0.0.1" in dynamic[f"{alias}-tls"]["nodes"][broker]
        assert props["authorizer.class.name"].endswith("StandardAuthorizer")


def test_k8s_acls_reach_every_broker_through_its_own_port_forward(k8s_secure):
    """port-forward: each broker advertises ADMIN on 127.0.0.1 at the stack's own local
    port of its tunnel, which the ACL resource opens (kubectl port-forward) before any call."""
    mocks, built = k8s_secure
    platform = built["platform"]
    dynamic = {r.name: r.inputs for r in mocks.resources if r.typ.startswith("pulumi-python:dynamic")}
    for alias in ("edge", "central"):
        broker = f"{alias}-broker-0"
        props = dict(line.split("=", 1) for line in manifests(built, "ConfigMap")[f"{broker}-files"]["data"][
            "server.properties"].splitlines() if "=" in line and not line.startswith("#"))
        _, port = platform.address(broker, "admin")
        (advertised,) = [a for a in props["advertised.listeners"].split(",") if a.startswith("ADMIN://")]
        local_port = int(advertised.rpartition(":")[2])
        assert advertised == f"ADMIN://127.0.0.1:{local_port}" and f"ADMIN://0.0.0.0:{port}" in props["listeners"]
        (service,) = [s for s in manifests(built, "Service").values() if s["metadata"]["name"] == broker]
        assert {"name": "admin", "port": port, "targetPort": port} in ints(service["spec"]["ports"])
        acl = dynamic[f"{alias}-acls"]
        assert acl["bootstrap"] == f"127.0.0.1:{local_port}"
        assert acl["tunnels"] == [f"kube://mirrorstack-{STACK}/service/{broker}:{port}?local={local_port}"]
        assert "127.0.0.1" in dynamic[f"{alias}-tls"]["nodes"][broker]
    in_cluster = KubernetesPlatform(STACK, rest_access="in-cluster")
    assert in_cluster.admin_listener("edge-broker-0") is None  # the program is in the cluster: INTERNAL answers


def test_a_deployed_cluster_takes_scram_sha_256_as_it_takes_scram_sha_512():
    """Issue 46: SCRAM-SHA-256 was accepted for external clusters only."""
    from mirrorstack.kafka import security
    topology = load_topology({"clusters": {"a": {"security": {"protocol": "SASL_SSL", "mechanism": "SCRAM-SHA-256"}},
                                           "b": {}}, "flows": [{"source": "a", "target": "b"}],
                              "principals": {"app": {"cluster": "a", "allow": []}}})
    sec = topology.clusters["a"].security
    assert sec.sasl_mechanism == "SCRAM-SHA-256" and topology.authorizes("a")
    props = security.broker_listener_settings(sec, client="h:1", internal="h:2", listen_client="0:1",
                                              listen_internal="0:2", keystore="k", truststore="t", secrets_file="s")
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-256"
    assert props["listener.name.client.scram-sha-256.sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.scram.ScramLoginModule required")
    assert security.broker_secret_files(sec, "pw")["secrets/scram.properties"].startswith("SCRAM-SHA-256=iterations=")
    assert security.scram_user_args(sec, bootstrap="b", command_config="c", scram_file="f")[-2:] == [
        "--add-config-file", "f"]


def test_the_acl_resource_is_given_every_broker(tmp_path):
    """Issue 46, defect 4: it was given broker 0 only, so `refresh` failed whenever broker 0 was down."""
    document = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text())["config"]["mirrorstack:topology"]
    document["clusters"]["edge"]["brokers"] = 3
    topology = load_topology(on_platform(document, "local"))
    platform = LocalPlatform(STACK, str(tmp_path))
    mocks, _ = deploy(lambda: platform, topology=topology, stack=STACK)
    dynamic = {r.name: r.inputs for r in mocks.resources if r.typ.startswith("pulumi-python:dynamic")}
    assert dynamic["edge-acls"]["bootstrap"].split(",") == [
        "%s:%d" % platform.host_address(f"edge-broker-{i}", "internal") for i in range(3)]
    # keyed by the ACL, so `preview --diff` shows each one added or removed (a list showed index shifts)
    assert dynamic["edge-acls"]["acls"]["allow User:mirrorstack READ on TOPIC orders (LITERAL)"].startswith(
        "flow edge->central: source read")


# ---------------------------------------------------------------- brokers' logins (docker, kubernetes)

LOGINS = "pulumi-python:dynamic/kafka:BrokerLogins"
STACK_USERS = {"edge-broker-0": ("SCRAM-SHA-256", {"mirrorstack", "orders-app", "newcomer-edge"}),
               "central-broker-0": ("PLAIN", {"mirrorstack", "reports-app", "newcomer-central"})}


def logins_of(mocks) -> dict[str, dict]:
    return {name.removesuffix("-logins"): inputs for name, inputs in mocks.of_type(LOGINS).items()}


def depends_on(mocks, resource: str, suffix: str, typ: str = DYNAMIC) -> bool:
    """Whether the registration of type `typ` named `resource` (its name's end) depends on one ending in `suffix`."""
    (deps,) = [deps for (t, name), deps in mocks.dependencies.items()
               if name.endswith(f"-{resource}") and (t == typ or (typ == DYNAMIC and t.startswith(DYNAMIC)))]
    return any(name.endswith(suffix) for _, name in deps)


def test_docker_brokers_log_in_as_the_stacks_users_after_each_start(docker_secure):
    """After each start (a new container id), the program logs in as every SASL user of
    the stack on the broker's CLIENT listener, published on 127.0.0.1 for it; the users,
    the clients' key and the node's way in are secrets, and nothing secret is elsewhere."""
    mocks, built = docker_secure
    platform, containers, logins = built["platform"], docker_containers(mocks), logins_of(mocks)
    assert set(logins) == set(STACK_USERS)  # SASL brokers only: no controller, no worker
    for broker, (mechanism, users) in STACK_USERS.items():
        login = logins[broker]
        client_port = platform.address(broker, "kafka")[1]
        (published,) = ints([p["external"] for p in containers[broker]["ports"] if p["internal"] == client_port])
        assert (login["address"], login.get("tunnel")) == (f"localhost:{published}", None)
        assert (login["broker"], login["mechanism"], login["protocol"]) == (broker, mechanism, "SASL_SSL")
        assert SECRET_SIG in login["users"] and set(login["users"]["value"]) == users
        assert login["started"].endswith("_id")  # the container's id: replaced, checked again
        assert login["logs"] == f"docker logs mirrorstack-{STACK}-{broker}"
        assert "FAKE-CA-" in login["truststore"]
        assert depends_on(mocks, f"{broker}-logins", f"-{broker}")  # its container
    # SCRAM users are set again first, as a node through the ACL resource's ADMIN way in
    edge_admin = logins["edge-broker-0"]["admin"]
    assert SECRET_SIG in edge_admin and FAKE_KEY_MARK in edge_admin["value"]["admin_keystore"]
    assert edge_admin["value"]["bootstrap"] == mocks.of_type(DYNAMIC_ACLS)["edge-acls"]["bootstrap"]
    assert logins["central-broker-0"].get("admin") is None  # PLAIN users are in the broker's JAAS
    central_key = logins["central-broker-0"]["keystore"]  # mTLS: the clients' certificate
    assert SECRET_SIG in central_key and FAKE_KEY_MARK in central_key["value"]
    assert logins["edge-broker-0"].get("keystore") is None
    assert leaks(mocks) == []


DYNAMIC_ACLS = "pulumi-python:dynamic/kafka:KafkaAcls"


def test_a_roll_goes_on_only_once_the_broker_before_let_the_users_in(tmp_path):
    """The next broker (and what needs the cluster: its ACL resource) waits for the
    previous broker's logins, so a broker that refuses a user stops the roll."""
    document = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text())["config"]["mirrorstack:topology"]
    document["clusters"]["edge"]["brokers"] = 2
    runs = {"docker": "docker:index/container:Container", "kubernetes": "kubernetes:apps/v1:StatefulSet"}
    for platform, make in (("docker", lambda: DockerPlatform(STACK)), ("kubernetes", lambda: KubernetesPlatform(STACK))):
        topology = load_topology({**on_platform(document, platform),
                                  "images": {"spark": "registry.example.com/mirrorstack/spark:1"}})
        mocks, _ = deploy(make, topology=topology, stack=STACK)
        assert set(logins_of(mocks)) == {"edge-broker-0", "edge-broker-1", "central-broker-0"}
        assert depends_on(mocks, "edge-broker-1", "-edge-broker-0-logins", runs[platform]), platform
        assert depends_on(mocks, "edge-acls", "-edge-broker-1-logins"), platform


def test_k8s_brokers_log_in_through_a_port_forward_or_in_the_cluster(k8s_secure):
    """port-forward: a tunnel to the broker's CLIENT port (a free local port, opened by the
    check), after its roll (the StatefulSet's generation); in-cluster: its own address."""
    mocks, built = k8s_secure
    platform, logins = built["platform"], logins_of(mocks)
    assert set(logins) == set(STACK_USERS)
    for broker in STACK_USERS:
        port = platform.address(broker, "kafka")[1]
        assert logins[broker].get("address") is None
        assert logins[broker]["tunnel"] == f"kube://mirrorstack-{STACK}/service/{broker}:{port}"
        assert logins[broker]["logs"] == f"kubectl logs --namespace mirrorstack-{STACK} {broker}-0"
        assert depends_on(mocks, f"{broker}-logins", f"-{broker}-rollout")
        (statefulset,) = [m for m in manifests(built, "StatefulSet").values() if m["metadata"]["name"] == broker]
        assert not holds_secret_text(ints(statefulset))  # the passwords stay in the program
    in_cluster = KubernetesPlatform(STACK, rest_access="in-cluster").client_login("edge-broker-0", "kafka")
    assert (in_cluster.address, in_cluster.tunnel) == (
        f"edge-broker-0.mirrorstack-{STACK}.svc.cluster.local:9092", None)
    assert LocalPlatform(STACK, "/unused").client_login("edge-broker-0", "kafka") is None  # its start checks
