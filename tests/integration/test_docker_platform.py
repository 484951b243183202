"""`platform: docker` on a real Docker engine (issue 18): the aggregation and
secure stacks' graphs, carried out by the harness that stands in for the
pulumi-docker provider (tests/support/docker_provider.py), with the
mirrorstack images (`make images`). Each stack comes up once; its tests run
in order on it, the last one tears it down.

Records are produced and read inside the stack's network by one-shot
containers of the Kafka image running Kafka's console clients (the brokers
publish no port), exactly as another container of the stack would."""
from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import re
import signal
import tarfile
import time
from urllib.parse import quote

import docker
import pytest
import requests
import yaml

from mirrorstack.certificates.tls import keystore_parts
from mirrorstack.kafka import security
from mirrorstack.model.spec import load_topology
from mirrorstack.properties import render_properties
from mirrorstack.failover.switch import FailoverSwitchProvider
from mirrorstack.connect.healing import CHECK_ERRORS, FAILED_PARTS, LAST_CHECK, RESTARTS_TOTAL
from mirrorstack.kafka import broker_logins
from mirrorstack.kafka.acl_resource import acl_binding, acl_filter, admin_client
from mirrorstack.kafka.scram_users import scram_mechanism, set_users
from mirrorstack.kafka.acls import Acl
from mirrorstack.monitoring.metrics import DELIVERY_CONFIRMED, DELIVERY_EXTRAS, DELIVERY_MISSING, MM2_RECORDS
from mirrorstack.platforms import make_platform, tunnels
from mirrorstack.platforms.docker import tunnel as docker_tunnel
from mirrorstack.validation.continuous import SERVICE as VALIDATOR
from mirrorstack.versions import MIRRORSTACK_IMAGES, mirrorstack_image, official_image
from tests.support import connect_rest
from tests.support.docker_provider import CONTAINER, DYNAMIC, deploy_on_engine
from tests.support.engine_over_tcp import EngineOverTcp
from tests.support.pulumi_mocks import unwrap_secrets
from tests.support.secured import private_key_bodies
from tests.support.stacks import REPO, on_c1_only, on_platform, port_base
from tests.support.streaming_validator import READ_METRICS_INSIDE, delivery_totals
from tests.support.supervisor_metrics import supervisor_samples
from tests.support.waiting import wait_until, wait_until_equal
from tools.docker_engine import API_TIMEOUT, ensure_engine, stop_engine

pytestmark = pytest.mark.integration

RECORDS = 40  # per region and batch
TOPIC = "orders"
JOB = "validation-job"
WAIT = 180  # seconds: a restarted broker, records crossing MM2
SUPERVISOR = "supervisor-central"  # the Connect group's self-healing


def image(key: str) -> str:
    """The image `make images` builds for `key`; the others stay the official pins."""
    return mirrorstack_image(key) if key in MIRRORSTACK_IMAGES else official_image(key)


def docker_topology(stack: str, **changes):
    """The stack file's topology on `platform: docker` with the mirrorstack
    images, its JVMs on C1 only (tests/support/stacks.py); the validation waits briefly (it first runs
    before any record)."""
    document = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    topology = load_topology(on_c1_only({**on_platform(document["mirrorstack:topology"], "docker"),
                                         "images": {key: image(key) for key in MIRRORSTACK_IMAGES}, **changes}))
    validation = topology.validation.model_copy(update={"wait_seconds": 30})
    return topology.model_copy(update={"validation": validation})


@pytest.fixture(scope="module")
def engine():
    engine = ensure_engine()
    try:
        yield engine
    finally:
        stop_engine(engine)


def bring_up(engine, stack: str, *, over_tcp: EngineOverTcp | None = None, **changes):
    """Deploy `stack` through the harness; yield it; destroy it (idempotent).
    `over_tcp`: the harness and the program reach the engine at its TCP URL (a remote engine's case)."""
    topology = docker_topology(stack, **changes)
    # this test process's own port range: the stack's default one may be another worker's stack's
    base = port_base()
    docker_host = over_tcp.url if over_tcp else None
    make = lambda: make_platform(topology.platform, stack, local_dir="unused", images=topology.images,  # noqa: E731
                                 port_base=base, docker_host=docker_host)
    client = docker.DockerClient(base_url=docker_host, timeout=API_TIMEOUT) if over_tcp else engine.client
    deployed = deploy_on_engine(client, make, topology, stack)
    try:
        yield deployed
    finally:
        deployed.mocks.destroy()


def stack_containers(engine, stack: str) -> dict[str, object]:
    """service → container of every container the stack labelled (running or not)."""
    found = engine.client.containers.list(all=True, filters={"label": f"mirrorstack.stack={stack}"})
    return {c.labels["mirrorstack.service"]: c for c in found}


def health(container) -> str | None:
    container.reload()
    return container.attrs["State"].get("Health", {}).get("Status")


def run_in_network(deployed, script: str, timeout: int = WAIT) -> tuple[int, str, str]:
    """Run `script` (sh) in a one-shot container of the Kafka image on the
    stack's network; (exit code, stdout, stderr)."""
    client = deployed.mocks.client
    container = client.containers.run(image("kafka"), ["/bin/sh", "-c", script], detach=True,
                                      network=deployed.platform.network_name)
    try:
        code = container.wait(timeout=timeout)["StatusCode"]
        return (code, container.logs(stdout=True, stderr=False).decode(),
                container.logs(stdout=False, stderr=True).decode())
    finally:
        container.remove(force=True)


KAFKA = "java -cp '/opt/kafka/libs/*'"


def produce(deployed, cluster: str, values: list[str]) -> None:
    """Create the topic (2 partitions) if needed and write `values` into it, from inside the network."""
    bootstrap = f"{cluster}-broker-0:9092"
    script = (f"{KAFKA} org.apache.kafka.tools.TopicCommand --bootstrap-server {bootstrap} --create "
              f"--if-not-exists --topic {TOPIC} --partitions 2 --replication-factor 1 && "
              f"printf '%s\\n' {' '.join(values)} | {KAFKA} org.apache.kafka.tools.ConsoleProducer "
              f"--bootstrap-server {bootstrap} --topic {TOPIC} --producer-property acks=all")
    code, out, err = run_in_network(deployed, script)
    assert code == 0, (cluster, out, err)


def consume_all(deployed, cluster: str, expected: int) -> list[str]:
    """The values of TOPIC on `cluster`, read from the beginning until
    `expected` records arrived (or none came for WAIT seconds)."""
    script = (f"{KAFKA} org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server {cluster}-broker-0:9092 "
              f"--topic {TOPIC} --from-beginning --max-messages {expected} --timeout-ms {WAIT * 1000} "
              "--consumer-property allow.auto.create.topics=false")
    _, out, err = run_in_network(deployed, script, timeout=WAIT + 60)
    values = [line for line in out.split() if RECORD.fullmatch(line)]  # not the tool's notices
    assert len(values) == expected, (len(values), err[-2000:])
    return values


def rerun_validation(deployed) -> tuple[int, str]:
    """Start the stack's validation job container again (same job, flows and
    files); its exit code and output."""
    job = stack_containers(deployed.mocks, deployed.platform.stack)[JOB]
    started = int(time.time())
    job.start()
    code = job.wait(timeout=600)["StatusCode"]
    return code, job.logs(stdout=True, stderr=False, since=started).decode(errors="replace")


def assert_validated(code: int, output: str, records: int) -> None:
    """The job passed, having checked `records` records, none missing."""
    assert code == 0, output[-3000:]
    assert f"replication check PASSED: {records} record(s)" in output, output[-3000:]
    assert re.search(rf"source {records}  target {records}  matched {records}  missing 0  ", output), output[-3000:]


def app_client(deployed, alias: str, user: str) -> str:
    """Client properties of the application user `user` on the secure stack's `alias`
    (SCRAM on edge, PLAIN with a client certificate on central), its CA and keys inline."""
    dynamic = deployed.outputs_of(DYNAMIC)

    def named(name: str) -> dict:  # the topology's prefix before the logical name
        (found,) = [out for key, out in dynamic.items() if key == name or key.endswith(f"-{name}")]
        return found
    tls_out = named(f"{alias}-tls")
    mechanism = "SCRAM-SHA-512" if alias == "edge" else "PLAIN"
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
             "sasl.jaas.config": security.jaas_config(mechanism, user, named(f"{alias}-{user}-password")["result"]),
             "ssl.truststore.type": "PEM", "ssl.truststore.certificates": tls_out["truststore"]}
    if alias == "central":  # mtls: any certificate of the CA; the SASL user is the principal
        key, cert = keystore_parts(tls_out["leaves"]["client"])
        props.update({"ssl.keystore.type": "PEM", "ssl.keystore.key": key, "ssl.keystore.certificate.chain": cert})
    return render_properties(props)


def run_as(deployed, alias: str, user: str, command: str, records: list[str] | None = None,
           timeout: int = WAIT) -> tuple[int, str, str]:
    """`command` (a Kafka tool's class and arguments; `{config}` is the user's client
    properties) in a one-shot container on the stack's network, `records` on its stdin."""
    config = base64.b64encode(app_client(deployed, alias, user).encode()).decode()
    feed = f"printf '%s\\n' {' '.join(records)} | " if records else ""
    script = (f"echo {config} | base64 -d > /tmp/client.properties && "
              f"{feed}{KAFKA} {command.format(config='/tmp/client.properties')}")
    return run_in_network(deployed, script, timeout=timeout)


RECORD = re.compile(r"[a-z]+-[a-z]-[0-9]+")  # what `values` makes
REFUSED = re.compile(r"AuthorizationException|authorization failed|not authorized", re.I)


def values(region: str, batch: str) -> list[str]:
    return [f"{region}-{batch}-{i}" for i in range(RECORDS)]


def test_an_absent_image_fails_naming_make_images_and_leaves_nothing(engine):
    topology = docker_topology("aggregation")
    topology = topology.model_copy(update={"images": topology.images.model_copy(
        update={"kafka": "mirrorstack/kafka:0.0.0-missing"})})
    base = port_base()
    make = lambda: make_platform("docker", "aggregation", local_dir="unused", images=topology.images,  # noqa: E731
                                 port_base=base)
    with pytest.raises(Exception, match=r"mirrorstack/kafka:0\.0\.0-missing.*`make images`"):
        deploy_on_engine(engine.client, make, topology, "aggregation")
    client = engine.client
    assert not [c.name for c in client.containers.list(all=True) if c.name.startswith("mirrorstack-aggregation")]
    assert not [n.name for n in client.networks.list() if n.name.startswith("mirrorstack-aggregation")]
    assert not [v.name for v in client.volumes.list() if v.name.startswith("mirrorstack-aggregation")]


# ---------------------------------------------------------------- aggregation


# Monitoring too: the JMX agent in every JVM, Prometheus (the mirrorstack image) scraping them
# inside the network. No Grafana: Debian packages none, and no image can be pulled here.
MONITORING = {"grafana": False, "scrape_interval": "5s"}
# The one-shot job in `up` and the continuous validator beside the flows (the window holds a broker's
# restart). A batch every 15 s: it runs through each module's whole life, and a batch costs CPU even
# when nothing new came (its state's timeouts); the tests wait for its figures, not for a batch.
BOTH = {"wait_seconds": 30, "mode": "both", "continuous": {"window_seconds": 90, "trigger_seconds": 15}}


@pytest.fixture(scope="class")
def aggregation(engine):
    yield from bring_up(engine, "aggregation", monitoring=MONITORING, validation=BOTH)


def delivered(deployed) -> dict[str, float]:
    """The continuous validator's totals over every flow and topic, as Prometheus scraped them."""
    figures = {}
    for name, metric in (("confirmed", DELIVERY_CONFIRMED), ("missing", DELIVERY_MISSING),
                         ("extras", DELIVERY_EXTRAS)):
        result = prometheus_query(deployed, "/api/v1/query", query=f"sum({metric})")["result"]
        figures[name] = float(result[0]["value"][1]) if result else None
    return figures


def wait_delivered(deployed, validator, what: str, expected: dict) -> None:
    """Wait until Prometheus has the validator's totals at `expected`; else fail with the last totals and
    the validator container's state and log (what it read, and any failure of its query)."""
    try:
        wait_until_equal(what, lambda: delivered(deployed), expected, timeout=WAIT)
    except AssertionError as failed:
        validator.reload()
        logs = validator.logs(tail=60).decode(errors="replace")
        raise AssertionError(f"{failed}\nvalidator {validator.status}, {validator.attrs['RestartCount']} "
                             f"restart(s); its log's end:\n{logs}") from None


def prometheus_query(deployed, path: str, **params) -> dict:
    """Prometheus's HTTP API through its port published on 127.0.0.1."""
    container = stack_containers(deployed.mocks, deployed.platform.stack)["prometheus"]
    (binding,) = container.attrs["HostConfig"]["PortBindings"]["9090/tcp"]
    assert binding["HostIp"] == "127.0.0.1"
    reply = requests.get(f"http://127.0.0.1:{binding['HostPort']}{path}", params=params, timeout=10)
    reply.raise_for_status()
    return reply.json()["data"]


class TestAggregation:
    """us and uk mirrored into central; the Spark job reconciles them."""

    def test_every_service_container_is_healthy_and_restarts_unless_stopped(self, aggregation):
        found = stack_containers(aggregation.mocks, "aggregation")
        services = {s for s in found if s not in (JOB, "prometheus", SUPERVISOR, VALIDATOR)}
        assert services == {"us-controller", "uk-controller", "central-controller", "us-broker-0", "uk-broker-0",
                            "central-broker-0", "connect-central-0"}
        assert found["prometheus"].attrs["Config"]["Image"] == image("prometheus")
        # the Connect group's self-healing supervisor: python3 of the spark image, restarted unless stopped
        supervisor = found[SUPERVISOR]
        assert supervisor.attrs["Config"]["Image"] == image("spark") and supervisor.status == "running"
        assert supervisor.attrs["HostConfig"]["RestartPolicy"]["Name"] == "unless-stopped"
        assert not supervisor.attrs["HostConfig"]["PortBindings"]
        # the continuous validator: Spark in the spark image, beside the flows, restarted unless stopped
        validator = found[VALIDATOR]
        assert validator.attrs["Config"]["Image"] == image("spark") and validator.status == "running"
        assert validator.attrs["HostConfig"]["RestartPolicy"]["Name"] == "unless-stopped"
        assert not validator.attrs["HostConfig"]["PortBindings"]
        for service in services:
            container = found[service]
            assert health(container) == "healthy", (service, container.logs(tail=30))
            assert container.attrs["HostConfig"]["RestartPolicy"]["Name"] == "unless-stopped"
            assert container.attrs["Config"]["Image"] == image("kafka")
        # Only Connect's REST API is published, and only on loopback.
        bindings = {s: found[s].attrs["HostConfig"]["PortBindings"] for s in services}
        published = {s: ports for s, ports in bindings.items() if ports}
        assert list(published) == ["connect-central-0"]  # of the Kafka services; Prometheus's: below
        (binding,) = published["connect-central-0"]["8083/tcp"]
        assert binding["HostIp"] == "127.0.0.1"

    def test_the_validation_job_ran_during_up(self, aggregation):
        job = aggregation.outputs_of(CONTAINER)[f"{aggregation.platform.prefix}-{JOB}"]
        assert job["exitCode"] == 0, job.get("containerLogs")
        assert job["image"] == image("spark")
        # the stack output `validation`: the report the job printed, summed up as local's is (per flow;
        # before any record was produced, so nothing checked)
        validation = aggregation.built["validation"]
        assert (validation["status"], validation["platform"]) == ("nothing-checked", "docker"), validation
        assert set(validation["flows"]) == {"us->central", "uk->central"}, validation
        assert validation["records_checked"] == 0 and validation["failures"] == [], validation

    def test_records_from_us_and_uk_arrive_in_central(self, aggregation):
        """Validated by the Spark container after the broker crash below, these records with the rest."""
        produce(aggregation, "us", values("us", "a"))
        produce(aggregation, "uk", values("uk", "a"))
        arrived = consume_all(aggregation, "central", 2 * RECORDS)
        assert sorted(arrived) == sorted(values("us", "a") + values("uk", "a"))

    def test_prometheus_scrapes_every_jvm_and_sees_the_records_mm2_copied(self, aggregation):
        """The JMX agent (in the image, at the contract's path) runs in every JVM and
        Prometheus reaches each by its name on the stack network."""
        deadline = time.monotonic() + 60
        while True:
            targets = prometheus_query(aggregation, "/api/v1/targets")["activeTargets"]
            health_of = {t["labels"]["instance"]: t["health"] for t in targets}
            if health_of and set(health_of.values()) == {"up"}:
                break
            assert time.monotonic() < deadline, health_of
            time.sleep(2)
        assert {instance.rpartition(":")[0] for instance in health_of} == {
            "us-controller", "uk-controller", "central-controller", "us-broker-0", "uk-broker-0", "central-broker-0",
            "connect-central-0", SUPERVISOR, VALIDATOR}, health_of
        # The supervisor reads Connect in the network: every connector of both flows, none failed.
        watched = prometheus_query(aggregation, "/api/v1/query", query=FAILED_PARTS)["result"]
        assert sorted((r["metric"]["connector"], r["value"][1]) for r in watched) == sorted(
            (f"{flow}.Mirror{kind}Connector", "0") for flow in ("us->central", "uk->central")
            for kind in ("Source", "Checkpoint", "Heartbeat"))
        errors = prometheus_query(aggregation, "/api/v1/query", query=CHECK_ERRORS)["result"]
        assert [r["value"][1] for r in errors] == ["0"]
        copied = {}
        while sum(copied.values()) < 2 * RECORDS:  # the counters of the records test's batch
            result = prometheus_query(aggregation, "/api/v1/query",
                                      query=f"sum by (flow) ({MM2_RECORDS}{{topic=\"{TOPIC}\"}})")["result"]
            copied = {r["metric"]["flow"]: float(r["value"][1]) for r in result}
            assert time.monotonic() < deadline + 60, copied
            time.sleep(2)
        assert copied == {"us->central": RECORDS, "uk->central": RECORDS}

    def test_a_crashed_broker_restarts_and_replication_goes_on_with_nothing_missing(self, aggregation):
        """The broker's JVM (the container's main process) is SIGKILLed, as by the
        OOM killer or a crash. Not with `docker kill`: the engine counts that as
        a manual stop (it marks the container manually stopped), and a restart
        policy by design never restarts a container stopped so."""
        broker = stack_containers(aggregation.mocks, "aggregation")["us-broker-0"]
        restarts = broker.attrs["RestartCount"]
        os.kill(broker.attrs["State"]["Pid"], signal.SIGKILL)  # the JVM: the start script exec'd it
        deadline = time.monotonic() + WAIT
        while health(broker) != "healthy" or broker.attrs["RestartCount"] == restarts:  # health() reloads
            assert time.monotonic() < deadline, (broker.status, broker.attrs["State"], broker.logs(tail=30))
            time.sleep(2)
        assert broker.attrs["RestartCount"] == restarts + 1
        produce(aggregation, "us", values("us", "b"))
        arrived = consume_all(aggregation, "central", 3 * RECORDS)
        assert sorted(arrived) == sorted(values("us", "a") + values("uk", "a") + values("us", "b"))
        assert_validated(*rerun_validation(aggregation), 3 * RECORDS)

    def test_the_continuous_validator_confirms_each_record_once_across_its_own_crash(self, aggregation):
        """Every record of the batches above confirmed, none missing; its process killed (as by the OOM
        killer), the container restarts and goes on from the checkpoint in its work folder: a batch
        produced meanwhile is confirmed and nothing counted twice."""
        expected = {"confirmed": 3 * RECORDS, "missing": 0, "extras": 0}
        validator = stack_containers(aggregation.mocks, "aggregation")[VALIDATOR]
        wait_delivered(aggregation, validator, "the validator confirms the records of both regions", expected)
        restarts = validator.attrs["RestartCount"]
        os.kill(validator.attrs["State"]["Pid"], signal.SIGKILL)  # python3: the container's main process
        produce(aggregation, "uk", values("uk", "c"))

        def restarted():
            validator.reload()
            return validator.attrs["RestartCount"] > restarts and validator.status == "running"
        wait_until("the validator's container restarted", restarted, timeout=WAIT)
        expected["confirmed"] += RECORDS
        wait_delivered(aggregation, validator, "the batch made while it was down confirmed, nothing twice", expected)
        logs = validator.logs(tail=200).decode(errors="replace")
        assert "checkpoint" in logs and "Traceback" not in logs, logs[-3000:]

    def test_destroy_leaves_no_container_network_or_volume(self, aggregation):
        assert_destroyed(aggregation)


def assert_destroyed(deployed) -> None:
    deployed.mocks.destroy()
    client, prefix = deployed.mocks.client, deployed.platform.prefix
    stack = deployed.platform.stack
    assert not client.containers.list(all=True, filters={"label": f"mirrorstack.stack={stack}"})
    assert not [c.name for c in client.containers.list(all=True) if c.name.startswith(prefix)]
    assert not [n.name for n in client.networks.list() if n.name.startswith(prefix)]
    assert not [v.name for v in client.volumes.list() if v.name.startswith(prefix)]


# ---------------------------------------------------------------- secure


# a drill at the first `up` (over empty topics, no group yet), then another before the cutover
CUTOVER = {"primary": "edge", "standby": "central", "active": "edge", "cutover": True, "groups": ["billing"],
           "drill": {"run": "d0"}}
BILLING_READS = 50  # of the 80 records on edge's orders when the cutover runs


@pytest.fixture(scope="class")
def secure(engine):
    """Deployed through the engine's TCP URL, as to an engine on another machine: the
    program reaches Connect and the brokers' ADMIN listeners through its own tunnels."""
    # self-healing on a schedule a test watches run (seconds, where users have minutes)
    healing = {"backoff_seconds": 2, "max_restarts": 10, "check_seconds": 1}
    over_tcp = EngineOverTcp(engine.base_url)
    # edge on SCRAM-SHA-512 (the stack file's is SHA-256, which test_secure_stack runs): both on a real stack
    clusters = yaml.safe_load((REPO / "stacks" / "Pulumi.secure.yaml").read_text())["config"][
        "mirrorstack:topology"]["clusters"]
    clusters["edge"]["security"]["mechanism"] = "SCRAM-SHA-512"
    # a one-way move of group billing to central (a cutover), which TestSecure makes last; new groups and
    # topics seen within 10 s
    (flow,) = yaml.safe_load((REPO / "stacks" / "Pulumi.secure.yaml").read_text())["config"][
        "mirrorstack:topology"]["flows"]
    try:
        yield from bring_up(engine, "secure", over_tcp=over_tcp, clusters=clusters, connect={
            "central": {"kafka": "central", "rest_auth": True, "self_healing": healing}}, validation=BOTH,
            flows=[{**flow, "refresh_seconds": 10}], failover=CUTOVER)
    finally:
        over_tcp.close()


def generated_secrets(deployed) -> dict[str, str]:
    """Every secret the stack generated, from the real dynamic providers'
    outputs: the passwords and each private key's base64 lines."""
    found = {}
    for name, outputs in deployed.outputs_of(DYNAMIC).items():
        if "result" in outputs:
            found[f"{name} password"] = outputs["result"]
        pems = {**(outputs.get("leaves") or {}), "ca_key": outputs.get("ca_key") or ""}
        public = outputs.get("truststore") or ""  # an EC key's last line is its public key, also in the CA certificate
        for pem_name, pem in pems.items():
            for i, line in enumerate(private_key_bodies(pem)):
                if not (pem_name == "ca_key" and line in public):
                    found[f"{name} {pem_name} line {i}"] = line
    return found


def secret_uploads(deployed) -> dict[str, list[str]]:
    """container name → the files the graph uploads 0600 into it."""
    return {name: [u["file"] for u in outputs.get("uploads") or [] if u.get("permissions") == "0600"]
            for name, outputs in deployed.outputs_of(CONTAINER).items()}


def exec_output(container, argv: list[str]) -> str:
    """A command's output in a running container. Docker 20.10 can lose a
    short-lived exec's output under load (run 11: `id -u` answered "" with exit
    0, the machine at load 12), so an empty answer is asked again."""
    for _ in range(3):
        result = container.exec_run(argv)
        assert result.exit_code == 0, (argv, result.exit_code, result.output, container.status)
        if result.output.strip():
            return result.output.decode()
    raise AssertionError(f"{argv} printed nothing three times in {container.name} ({container.status})")


class TestSecure:
    """SASL_SSL clusters with generated certificates and passwords, in containers."""

    def test_every_service_container_is_healthy(self, secure):
        found = stack_containers(secure.mocks, "secure")
        assert {s for s in found if s not in (JOB, SUPERVISOR, VALIDATOR)} == {
            "edge-controller", "central-controller", "edge-broker-0", "central-broker-0", "connect-central-0"}
        assert found[VALIDATOR].status == "running", found[VALIDATOR].logs(tail=30)
        for service, container in found.items():
            if service not in (JOB, SUPERVISOR, VALIDATOR):
                assert health(container) == "healthy", (service, container.logs(tail=30))
        assert secure.outputs_of(CONTAINER)[f"{secure.platform.prefix}-{JOB}"]["exitCode"] == 0
        # The supervisor reads Connect behind its basic auth (the password from its 0600 file):
        # every connector watched, no check refused.
        read = ["python3", "-c", "import urllib.request; print(urllib.request.urlopen("
                "'http://127.0.0.1:9405/metrics', timeout=5).read().decode())"]
        deadline = time.monotonic() + WAIT
        while not (metrics := supervisor_samples(exec_output(found[SUPERVISOR], read)))[(LAST_CHECK, None)]:
            assert time.monotonic() < deadline, found[SUPERVISOR].logs(tail=30)
            time.sleep(1)
        assert metrics[(CHECK_ERRORS, None)] == 0, found[SUPERVISOR].logs(tail=30)
        assert {c: v for (m, c), v in metrics.items() if m == FAILED_PARTS} == {
            f"edge->central.Mirror{kind}Connector": 0 for kind in ("Source", "Checkpoint", "Heartbeat")}, metrics

    def test_mirror_maker_runs_behind_connects_basic_auth(self, secure):
        """The engine is reached over TCP (a remote engine): no port of the stack's
        Kafka services is published, and the real MM2 provider created the connectors
        through its own tunnel over the Docker API, which refuses requests without
        the password as the REST port does."""
        found = stack_containers(secure.mocks, "secure")
        assert not {s: c.attrs["HostConfig"]["PortBindings"] for s, c in found.items()
                    if s not in (JOB, SUPERVISOR) and c.attrs["HostConfig"]["PortBindings"]}
        (mm2,) = [unwrap_secrets(r.inputs) for r in secure.mocks.resources if r.typ.endswith(":MirrorMaker2Connectors")]
        assert mm2["connect_url"].startswith(f"docker://{secure.platform.prefix}-connect-central-0:8083?")
        assert docker_tunnel.connections(mm2["connect_url"]) > 0  # the provider's REST calls went through it
        url, auth = tunnels.local(mm2["connect_url"]), (mm2["connect_auth"]["username"], mm2["connect_auth"]["password"])
        assert requests.get(f"{url}/connectors", timeout=10).status_code == 401
        deadline = time.monotonic() + WAIT
        for name in mm2["connectors"]:
            while True:
                status = connect_rest.read(f"{url}/connectors/{quote(name, safe='')}/status", auth=auth)
                states = [status["connector"]["state"], *(t["state"] for t in status["tasks"])]
                # Checkpoint (no consumer group yet) and source (no topic yet) connectors may have no task.
                needs_task = name.endswith("HeartbeatConnector")
                if set(states) == {"RUNNING"} and (len(states) > 1 or not needs_task):
                    break
                assert time.monotonic() < deadline, status
                time.sleep(2)

    def test_deny_by_default_and_mm2_replicates_with_only_its_derived_acls(self, secure):
        """The secured clusters authorize on docker too: the ACL resource, run where `up`
        runs, reached each broker at its ADMIN listener, here through its own tunnel (the
        engine over TCP). A user without ACLs is refused; an application does what its
        section grants; MM2 copies its records with only the rights derived for the flow."""
        for resource in secure.mocks.resources:
            if resource.name.endswith("-acls"):
                (tunnel,) = unwrap_secrets(resource.inputs)["tunnels"]
                assert docker_tunnel.connections(tunnel) > 0, resource.name
        acls = {name.rpartition("-acls")[0].rpartition("-")[2]: out["acls"]
                for name, out in secure.outputs_of(DYNAMIC).items() if name.endswith("-acls")}
        assert any(" WRITE on TOPIC edge.orders " in line for line in acls["central"]), acls
        assert not any(line.startswith("allow User:mirrorstack WRITE") for line in acls["edge"])
        bootstrap = "{alias}-broker-0:9092"
        code, out, err = run_as(secure, "edge", "newcomer-edge", (
            "org.apache.kafka.tools.TopicCommand --bootstrap-server %s --command-config {config} --create "
            "--if-not-exists --topic orders --partitions 1 --replication-factor 1") % bootstrap.format(alias="edge"))
        assert code != 0 and REFUSED.search(out + err), (code, out[-2000:], err[-2000:])
        sent = values("edge", "a")
        edge, central = bootstrap.format(alias="edge"), bootstrap.format(alias="central")
        code, out, err = run_as(secure, "edge", "orders-app", (
            f"org.apache.kafka.tools.TopicCommand --bootstrap-server {edge} --command-config {{config}} --create "
            "--if-not-exists --topic orders --partitions 2 --replication-factor 1"))
        assert code == 0, (out[-2000:], err[-2000:])
        code, out, err = run_as(secure, "edge", "orders-app", (
            f"org.apache.kafka.tools.ConsoleProducer --bootstrap-server {edge} --topic orders "
            "--producer.config {config} --producer-property acks=all"), records=sent)
        assert code == 0, (out[-2000:], err[-2000:])
        code, out, err = run_as(secure, "central", "reports-app", (
            f"org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server {central} --topic edge.orders "
            f"--consumer.config {{config}} --group reports-docker --from-beginning --max-messages {len(sent)} "
            f"--timeout-ms {WAIT * 1000} --consumer-property isolation.level=read_committed "
            # until MM2 creates it (a client may not: auto-creation would be refused as a CREATE)
            "--consumer-property allow.auto.create.topics=false"), timeout=WAIT + 60)
        assert sorted(v for v in out.split() if RECORD.fullmatch(v)) == sorted(sent), (out[-3000:], err[-6000:])
        code, out, err = run_as(secure, "central", "reports-app", (  # it reads only
            f"org.apache.kafka.tools.ConsoleProducer --bootstrap-server {central} --topic edge.orders "
            "--producer.config {config} --producer-property max.block.ms=20000"), records=["x-x-1"])
        assert REFUSED.search(out + err), (code, out[-2000:], err[-2000:])
        self._healed_without_up(secure, sent)
        self._validated_as_it_went(secure, 2 * len(sent))

    @staticmethod
    def _validated_as_it_went(secure, copied: int) -> None:
        """The continuous validator reads both secured clusters with their client folders (uploaded to
        its container, 0600): each record copied above confirmed once, none missing."""
        validator = stack_containers(secure.mocks, "secure")[VALIDATOR]

        def figures() -> dict[str, float]:  # over every topic: the stack's one flow
            return delivery_totals(exec_output(validator, READ_METRICS_INSIDE))
        expected = {DELIVERY_CONFIRMED: copied, DELIVERY_MISSING: 0.0, DELIVERY_EXTRAS: 0.0}
        try:
            wait_until("the validator confirms every record copied", lambda: figures() == expected, timeout=WAIT)
        except AssertionError as late:
            raise AssertionError((str(late), figures(), validator.logs(tail=40).decode(errors="replace"))) from None

    @staticmethod
    def _healed_without_up(secure, sent: list[str]) -> None:
        """Self-healing on docker: MM2's write right on central revoked while records
        flow, the source task FAILS and the supervisor's container restarts it; the right
        back, every record arrives exactly once with no `up`."""
        (central_acls,) = [out for name, out in secure.outputs_of(DYNAMIC).items() if name.endswith("central-acls")]
        admin = admin_client(central_acls)  # as a node, at central's published ADMIN listener
        write = Acl("User:mirrorstack", "TOPIC", "edge.orders", "LITERAL", "WRITE")
        supervisor = stack_containers(secure.mocks, "secure")[SUPERVISOR]
        read = ["python3", "-c", "import urllib.request; print(urllib.request.urlopen("
                "'http://127.0.0.1:9405/metrics', timeout=5).read().decode())"]

        def restarts() -> float:
            return supervisor_samples(exec_output(supervisor, read))[(RESTARTS_TOTAL,
                                                                       "edge->central.MirrorSourceConnector")]
        assert restarts() == 0
        for future in admin.delete_acls([acl_filter(write)], request_timeout=30).values():
            future.result(timeout=30)
        more = values("edge", "b")
        code, out, err = run_as(secure, "edge", "orders-app", (
            "org.apache.kafka.tools.ConsoleProducer --bootstrap-server edge-broker-0:9092 --topic orders "
            "--producer.config {config} --producer-property acks=all"), records=more)
        assert code == 0, (out[-2000:], err[-2000:])
        deadline = time.monotonic() + WAIT
        while restarts() < 1:
            assert time.monotonic() < deadline, supervisor.logs(tail=30)
            time.sleep(1)
        assert "TopicAuthorizationException" in supervisor.logs(tail=200).decode(errors="replace")
        for future in admin.create_acls([acl_binding(write)], request_timeout=30).values():
            future.result(timeout=30)
        granted = time.monotonic()
        code, out, err = run_as(secure, "central", "reports-app", (
            "org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server central-broker-0:9092 "
            f"--topic edge.orders --consumer.config {{config}} --group reports-healed --from-beginning "
            f"--max-messages {len(sent) + len(more)} --timeout-ms {WAIT * 1000} "
            "--consumer-property isolation.level=read_committed"), timeout=WAIT + 60)
        assert sorted(v for v in out.split() if RECORD.fullmatch(v)) == sorted(sent + more), (out[-3000:], err[-3000:])
        print(f"\ndocker: healed and read back {time.monotonic() - granted:.0f} s after the grant "
              f"({restarts():.0f} restarts in all)")

    def test_brokers_let_the_stacks_users_in_and_a_refusing_broker_is_named(self, secure):
        """Broker readiness as clients see it: after each broker's start the program
        logged in as every SASL user of the stack on its CLIENT listener (BrokerLogins;
        the stack would not be up otherwise). A SCRAM user's password changed out of
        band: checked without setting the users again, the broker is named with that
        user only; with it (what `up` does) the user gets in again. A PLAIN user whose
        password the broker's JAAS does not hold is named the same way."""
        logins = {out["broker"]: unwrap_secrets(out) for name, out in secure.outputs_of(DYNAMIC).items()
                  if name.endswith("-logins")}
        assert {broker: set(login["users"]) for broker, login in logins.items()} == {
            "edge-broker-0": {"mirrorstack", "orders-app", "newcomer-edge"},
            "central-broker-0": {"mirrorstack", "reports-app", "newcomer-central"}}
        edge, central = logins["edge-broker-0"], logins["central-broker-0"]
        set_users(admin_client(edge["admin"]), scram_mechanism(edge["mechanism"]),  # as a node, out of band
                  {"newcomer-edge": "changed-out-of-band"}, "edge")
        with pytest.raises(RuntimeError) as refused:
            broker_logins.check({**edge, "admin": None}, timeout=10)
        first = str(refused.value).splitlines()[0]
        assert first.startswith("edge-broker-0 refuses the stack's SCRAM-SHA-512 user(s) on its client listener ")
        assert "newcomer-edge (" in first and "orders-app" not in first and "mirrorstack (" not in first, first
        started = time.monotonic()
        broker_logins.check(edge)  # set again first: every user gets in
        print(f"\ndocker: edge-broker-0's users set again and logged in within {time.monotonic() - started:.1f} s")
        with pytest.raises(RuntimeError, match=r"(?s)^central-broker-0 refuses the stack's PLAIN user\(s\) .*: "
                                               r"reports-app \(.*secrets/broker.properties"):
            broker_logins.check({**central, "users": {**central["users"], "reports-app": "not-its-password"}},
                                timeout=10)
        broker_logins.check(central)

    def test_secrets_are_files_0600_owned_by_the_images_user(self, secure):
        client = secure.mocks.client
        files = secret_uploads(secure)
        services = [name for name in files if not name.endswith(JOB)]
        assert all(files[name] for name in services), files  # every service reads some secret
        for name in services:
            container = client.containers.get(name)
            uid = exec_output(container, ["id", "-u"]).strip()
            # the spark image's user (mirrorstack's Python services), or Kafka's
            assert uid == ("185" if name.endswith((SUPERVISOR, VALIDATOR)) else "1000")
            for line in exec_output(container, ["stat", "-c", "%n %a %u %g", *files[name]]).splitlines():
                path, mode, owner, group = line.rsplit(" ", 3)
                assert (mode, owner, group) == ("600", uid, uid), line
        # The job's container has exited: its files, as the engine keeps them.
        job = f"{secure.platform.prefix}-{JOB}"
        assert files[job]
        for path in files[job]:
            stream, _ = client.containers.get(job).get_archive(path)
            member = tarfile.open(fileobj=io.BytesIO(b"".join(stream))).getmembers()[0]
            assert (member.mode & 0o777, member.uid) == (0o600, 185), path

    def test_no_secret_in_docker_inspect(self, secure):
        secrets = generated_secrets(secure)
        assert sum("password" in k for k in secrets) >= 3 and sum("line" in k for k in secrets) >= 4
        client = secure.mocks.client
        inspected = [client.api.inspect_container(c.id) for c in stack_containers(secure.mocks, "secure").values()]
        inspected += [client.api.inspect_network(secure.platform.network_name)]
        inspected += [client.api.inspect_volume(v.name) for v in client.volumes.list()
                      if v.name.startswith(secure.platform.prefix)]
        text = json.dumps(inspected)
        assert [k for k, secret in secrets.items() if secret in text] == []
        # Where they would go first: env, command, labels.
        for details in inspected[:-1]:
            config = details.get("Config") or {}
            parts = [*(config.get("Env") or []), *(config.get("Cmd") or []), *(config.get("Labels") or {}).values()]
            for part in parts:
                assert not any(secret in part for secret in secrets.values())

    def test_a_cutover_moves_a_group_exactly_from_a_container_on_the_stacks_network(self, secure):
        """The switch reads and writes both clusters, whose addresses are names on the stack's network:
        it runs in a one-shot container there (the engine reached over TCP, as a remote one), with the
        pair's client files and Connect's REST credentials, and only the rights derived for it. Group
        billing, having read part of edge's orders, resumes on central at the copy of the first record
        it had not read (read back by an independent consumer): 0 lost, 0 re-read; the container is gone."""
        code, out, err = run_as(secure, "edge", "orders-app", (
            "org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server edge-broker-0:9092 --topic orders "
            f"--consumer.config {{config}} --group billing --from-beginning --max-messages {BILLING_READS} "
            f"--timeout-ms {WAIT * 1000}"), timeout=WAIT + 60)
        assert len([v for v in out.split() if RECORD.fullmatch(v)]) == BILLING_READS, (out[-2000:], err[-3000:])
        acl_outputs = {name.rpartition("-acls")[0].rpartition("-")[2]: out
                       for name, out in secure.outputs_of(DYNAMIC).items() if name.endswith("-acls")}
        unread = first_unread(acl_outputs["edge"], "billing", "orders")
        assert unread, "billing had read every record: nothing to check the move by"
        (props,) = [out for out in secure.outputs_of(DYNAMIC).values() if {"active", "standby", "gate"} <= out.keys()]
        rehearse_the_cutover(secure, acl_outputs, unread)
        said = []
        with _progress_to(said):
            moved = FailoverSwitchProvider().update("failover", props, {**props, "active": "central"})
        report = moved.outs["report"]
        assert any("as container mirrorstack-secure-switch-" in line for line in said), said
        assert (report["kind"], report["mode"], report["gate"]["in_flight"]) == ("cutover", "planned", 0), report
        entry = report["groups"]["billing"]
        assert (entry["reread"], entry["lost"]) == (0, 0), entry
        assert {row["exact_by"] for row in entry["partitions"]} <= {"identity", "end"}, entry
        # what billing reads first on central, by an independent consumer from the offsets the switch wrote
        assert first_unread(acl_outputs["central"], "billing", "edge.orders", unread) == unread, report
        assert not secure.mocks.client.containers.list(all=True, filters={"label": "mirrorstack.service=failover-switch"})
        print("\nthe cutover on docker, as the switch said it:\n" + "\n".join(said))

    def test_destroy_leaves_no_container_network_or_volume(self, secure):
        assert_destroyed(secure)


def rehearse_the_cutover(secure, acl_outputs: dict, unread: dict[int, str]) -> None:
    """The drill at the first `up` passed with no group; another, with billing part read, runs in a
    container on the stack's network with the rights derived for it: billing's copy sits at the copy of
    its first unread record (0 re-read, 0 lost by identity), then the copy is gone, and billing itself
    is where it was on edge and nowhere on central."""
    from mirrorstack.failover.drill_resource import FailoverDrillProvider
    (props,) = [out for out in secure.outputs_of(DYNAMIC).values() if {"active", "drill", "report"} <= out.keys()]
    first = props["report"]
    assert (first["run"], first["passed"], first["groups"]) == ("d0", True, {}), first
    # the proof compares the unread records already on central: wait for them (a loaded machine lags)
    wait_until("central holds the copies of billing's unread records", lambda: values_from(
        acl_outputs["central"], "edge.orders", unread) >= set(unread.values()), timeout=WAIT)
    said = []
    with _progress_to(said):
        report = FailoverDrillProvider().update("drill", props, {**props, "drill": {**props["drill"], "run": "d1"}}
                                                ).outs["report"]
    assert any("as container mirrorstack-secure-switch-" in line for line in said), said
    proof = report["groups"]["billing"]["proof"]
    assert report["passed"] and (proof["reread"], proof["lost"]) == (0, 0) and proof["compared"] > 0, \
        json.dumps(report, indent=1)
    assert proof["copy"] == "mirrorstack-drill.d1.billing" and report["rto_seconds"] > 0, report
    assert first_unread(acl_outputs["edge"], "billing", "orders") == unread  # billing untouched
    assert first_unread(acl_outputs["central"], "billing", "edge.orders") == {}  # nothing written for it there
    print("\nthe drill on docker, as it said it:\n" + "\n".join(said))


@contextlib.contextmanager
def _progress_to(lines: list[str]):
    """The switch's progress lines (what `up` shows) collected."""
    from mirrorstack.failover import switch
    kept, switch.progress = switch.progress, lines.append
    try:
        yield
    finally:
        switch.progress = kept


def admin_consumer(acl_outputs: dict, group: str):
    """A consumer in `group` that commits nothing, as a node (a super user) at the cluster's ADMIN listener
    (through the stack's tunnels where it has them), reading committed records only."""
    from confluent_kafka import Consumer
    for tunnel in acl_outputs.get("tunnels") or []:
        tunnels.local(tunnel)
    key, cert = keystore_parts(acl_outputs["admin_keystore"])
    return Consumer({"bootstrap.servers": acl_outputs["bootstrap"], "security.protocol": "SSL",
                     "ssl.ca.pem": acl_outputs["truststore"], "ssl.certificate.pem": cert, "ssl.key.pem": key,
                     "group.id": group, "enable.auto.commit": False, "isolation.level": "read_committed",
                     "log_level": 0})


def values_from(acl_outputs: dict, topic: str, partitions) -> set[str]:
    """The values of `topic`'s `partitions` from their start to their end now, read as a node at the
    cluster's ADMIN listener, in no group."""
    from confluent_kafka import TopicPartition
    consumer = admin_consumer(acl_outputs, "unused")
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in partitions}
        todo = {p: high for p, (low, high) in ends.items() if high > low}
        consumer.assign([TopicPartition(topic, p, ends[p][0]) for p in todo])
        values, deadline = set(), time.monotonic() + 30
        while todo and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and not message.error():
                values.add(message.value().decode())
            # a position past the end: done (a transaction's marker may be the last offset)
            todo = {tp.partition: todo[tp.partition] for tp in consumer.position(
                [TopicPartition(topic, p) for p in todo]) if tp.offset < todo[tp.partition]}
        return values
    finally:
        consumer.close()


def first_unread(acl_outputs: dict, group: str, topic: str, partitions=range(2)) -> dict[int, str]:
    """partition → the value of the first record `group` has not read of `topic`'s `partitions` (those it has
    read to the end left out), read as a node (a super user) at the cluster's ADMIN listener, committing
    nothing."""
    from confluent_kafka import TopicPartition
    consumer = admin_consumer(acl_outputs, group)
    try:
        positions = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=30)
        todo = {tp.partition: tp.offset for tp in positions
                if tp.offset >= 0 and tp.offset < consumer.get_watermark_offsets(tp, timeout=30)[1]}
        consumer.assign([TopicPartition(topic, p, offset) for p, offset in todo.items()])
        first, deadline = {}, time.monotonic() + WAIT
        while len(first) < len(todo) and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and not message.error():
                first.setdefault(message.partition(), message.value().decode())
        assert len(first) == len(todo), (todo, first)
        return first
    finally:
        consumer.close()
