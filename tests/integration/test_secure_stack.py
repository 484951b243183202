"""`pulumi up --stack secure` through the real engine: edge (SASL_SSL, SCRAM-SHA-256)
replicated exactly-once into central (SASL_SSL, PLAIN, mTLS), with every
secret checked for leaks: state, Connect's config topic, `ps`, logs, files.
Then, on the same stack, the certificates' life: renewal in the window, a
CA rotation with a client writing throughout, a broker added under the new CA."""
import json
import os
import re
import signal
import stat
import subprocess
import threading
import time
from functools import partial
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
import yaml
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorstack.certificates.resource import CLOCK_OFFSET_ENV
from mirrorstack.certificates import tls
from mirrorstack.connect.healing import HELD, LAST_CHECK, RESTARTS_TOTAL
from mirrorstack.kafka.acl_resource import acl_binding, acl_filter
from mirrorstack.kafka.acls import VALIDATION_GROUPS, Acl, lines_of
from tests.support import connect_rest
from tests.support.kafka_clients import consume, create_topic, produce
from tests.support.restarts import kafka_node, overlapping_restarts, update_windows
from tests.support.secured import jaas_credentials, librdkafka_client, node_admin, principal_client, private_key_bodies
from tests.support.services import _parallel
from tests.support.stacks import deployed_stack, self_healing
from tests.support.supervisor_metrics import supervisor_samples

pytestmark = pytest.mark.integration

# Each of the 3 partitions gets hundreds of records over several transactions: enough for
# the exact (RECORDS, RECORDS, 0, 0) count to show loss or a duplicate; throughput is not the point.
RECORDS = 1_000
# The secure stack's edge (stacks/Pulumi.secure.yaml): the whole module runs on SCRAM-SHA-256, while
# tests/integration/test_scram_users.py and the docker module's secure stack keep SCRAM-SHA-512.
EDGE_MECHANISM = "SCRAM-SHA-256"


def _refused(conf: dict) -> bool:
    try:
        AdminClient({**conf, "log_level": 0}).list_topics(timeout=8)
    except KafkaException:
        return True
    return False


def _secrets(local: Path) -> dict[str, str]:
    """Every secret the stack generated, from the 0600 files that hold them."""
    found = {f"{alias} password": jaas_credentials(local / "clients" / alias)[1] for alias in ("edge", "central")}
    for pem in [*local.glob("*/secrets/server.pem"), local / "clients" / "central" / "client.pem"]:
        for i, line in enumerate(private_key_bodies(pem.read_text())):
            found[f"{pem.relative_to(local)} key line {i}"] = line
    return found


def _ca_keys(project) -> dict[str, str]:
    """The CA keys' base64 lines, from `pulumi stack export --show-secrets`."""
    exported = json.loads(project.run("stack", "export", "--show-secrets").stdout)
    found = {}
    for resource in exported["deployment"]["resources"]:
        if "ClusterCertificates" in resource["type"]:
            key = resource["outputs"]["ca_key"]
            key = json.loads(key["plaintext"]) if isinstance(key, dict) else key
            # An EC key's last PEM line is its public key alone, the same text as in the CA
            # certificate (public, in the truststore): only the other lines are secret.
            public = resource["outputs"]["truststore"]
            found.update({f"{resource['urn']} CA key line {i}": line
                          for i, line in enumerate(private_key_bodies(key)) if line not in public})
    assert len(found) >= 2, "no CA key in the state"
    return found


def _whole_topic(bootstrap: str, topic: str, client: dict, timeout: float = 60, group: str = "whole") -> list[bytes]:
    """Every record value of `topic` up to its end now (its high watermarks): all it
    holds, read as soon as it is read, not for a fixed time (read_uncommitted: an
    open or aborted transaction's records are read too)."""
    consumer = Consumer({**client, "bootstrap.servers": bootstrap, "group.id": f"{group}-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    values = []
    try:
        partitions = consumer.list_topics(topic, timeout=20).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20) for p in partitions}
        consumer.assign([TopicPartition(topic, p, low) for p, (low, _) in ends.items()])
        pending, deadline = {p for p, (low, high) in ends.items() if high > low}, time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            values += [m.value() for m in consumer.consume(num_messages=500, timeout=1.0) if not m.error()]
            # by position, not by the last record: transaction markers hold offsets too
            pending = {p for p in pending if consumer.position([TopicPartition(topic, p)])[0].offset < ends[p][1]}
        assert not pending, f"{topic}: partitions {sorted(pending)} not read to their end in {timeout:.0f}s"
    finally:
        consumer.close()
    return values


def _app(project, name: str) -> dict:
    """librdkafka settings of an application principal of the stack (consumers: groups `reports-*`)."""
    credentials = project.outputs()["principal_credentials"][name]
    mechanism = credentials["mechanism"]
    conf = principal_client(project.local_dir, credentials["cluster"], mechanism, credentials)
    return {**conf, "group.id": f"reports-{time.monotonic_ns()}"} if name == "reports-app" else conf


def _leaks(text: str, secrets: dict[str, str]) -> list[str]:
    return [name for name, value in secrets.items() if value in text]


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    """ONE deployed secure stack for the module's tests, in file order: each
    later test starts from what the ones before left (more brokers, a new CA)."""
    tmp_path = tmp_path_factory.mktemp("secure")
    # Self-healing in seconds (restarts 0, 4, 12, 24... s after a failure), so the test sees it act.
    healing, validation = self_healing(backoff_seconds=2, max_restarts=10), {}

    def change(topology: dict) -> None:
        healing(topology)
        validation.update(topology.pop("validation"))  # the first test adds it once there are records

    with deployed_stack("secure", tmp_path, change=change) as (project, out):
        project.validation = validation
        yield project, out, tmp_path


def test_secure_stack_replicates_over_sasl_ssl_and_leaks_no_secret(secure):
    project, out, tmp_path = secure
    local = project.local_dir
    edge, central = out["clusters"]["edge"], out["clusters"]["central"]
    edge_client = librdkafka_client(local, "edge", EDGE_MECHANISM)
    central_client = librdkafka_client(local, "central", "PLAIN")
    writer, reader = _app(project, "orders-app"), _app(project, "reports-app")
    assert writer["sasl.mechanism"] == EDGE_MECHANISM, writer["sasl.mechanism"]

    # Only authenticated clients get in: no TLS, a wrong password, no client certificate.
    no_cert = {k: v for k, v in central_client.items() if not k.startswith(("ssl.certificate", "ssl.key"))}
    # each refusal is a timeout waited out: the three at once
    assert _parallel(partial(_refused, conf) for conf in (
        {"bootstrap.servers": edge}, {**edge_client, "bootstrap.servers": edge, "sasl.password": "wrong"},
        {**no_cert, "bootstrap.servers": central})) == [True, True, True]

    # Connect's REST API wants the generated credentials (stack output, a secret).
    rest, creds = out["connect"]["central"], out["connect_credentials"]["central"]
    assert requests.get(f"{rest}/connectors", timeout=10).status_code == 401
    assert requests.get(f"{rest}/connectors", timeout=10, auth=("mirrorstack", "wrong")).status_code == 401
    listed = requests.get(f"{rest}/connectors", timeout=10, auth=(creds["username"], creds["password"]))
    assert sorted(listed.json()) == ["edge->central.MirrorCheckpointConnector",
                                     "edge->central.MirrorHeartbeatConnector", "edge->central.MirrorSourceConnector"]

    create_topic(edge, "orders", partitions=3, replication_factor=1, client=writer)
    sent = produce(edge, "orders", RECORDS, prefix="secure", client=writer)
    arrived = consume(central, "edge.orders", expected=RECORDS, timeout=300,
                      client={**reader, "isolation.level": "read_committed"})
    assert sorted(r.value for r in arrived) == sorted(r.value for r in sent)

    _set_topology(project, lambda t: t.update(validation=project.validation))
    again = project.run("up", "--yes", "--skip-preview", "--config", "mirrorstack:validationRunId=secure-1",
                        timeout=900)
    # The replication plan read the SASL_SSL source through the flow's own client files.
    again_output = again.stdout + again.stderr
    assert re.search(r"orders +-> edge\.orders", again_output), again_output[-3000:]
    assert "not checked" not in again_output
    report = project.outputs()["validation"]
    counts = report["flows"]["edge->central"]
    assert report["passed"] is True, report
    assert (counts["source_records"], counts["matched"], counts["missing"], counts["duplicates"]) == \
        (RECORDS, RECORDS, 0, 0)

    secrets = {**_secrets(local), "Connect REST password": creds["password"],
               **{f"{name}'s password": c["password"] for name, c in project.outputs()["principal_credentials"].items()}}
    secrets.update(_ca_keys(project))  # the CA keys: kept only in state (encrypted), never in a file
    assert len(secrets) >= 5  # two passwords and at least the brokers' and a client's key
    # 1. Pulumi state (and its backups/history): only ciphertext.
    state = "".join(p.read_text(errors="ignore") for p in (tmp_path / "pulumi").rglob("*") if p.is_file())
    assert _leaks(state, secrets) == []
    assert '"secure":' in state or "ciphertext" in state  # the secrets are there, encrypted
    # 2. Connect's config topic: references, never values.
    configs = _whole_topic(central, f"{out['connect_groups']['central']}-configs", central_client,
                           group=f"{VALIDATION_GROUPS}whole")  # a group the stack's own user may describe
    config_text = "\n".join((value or b"").decode(errors="ignore") for value in configs)
    assert "${file:" in config_text and "sasl.jaas.config" in config_text
    assert _leaks(config_text, secrets) == []
    # 3. Command lines of every process on the host.
    ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert str(local) in ps  # the stack's JVMs are there to look at
    assert _leaks(ps, secrets) == []
    # 4. Logs: the services', and what `pulumi up` printed.
    logs = "".join(p.read_text(errors="ignore") for p in local.rglob("*.log"))
    assert logs and _leaks(logs + project.up_output + again_output, secrets) == []
    # 5. Files: a secret only in 0600 files of 0700 folders.
    for path in (p for p in local.rglob("*") if p.is_file()):
        if _leaks(path.read_text(errors="ignore"), secrets):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, path.parent
    assert os.access(local / "clients" / "edge" / "client.properties", os.R_OK)


# ---------------------------------------------------------------- authorization

SOURCE_TASKS, CHECKPOINTS = "edge->central.MirrorSourceConnector", "edge->central.MirrorCheckpointConnector"


def _produce_error(bootstrap: str, topic: str, client: dict) -> str | None:
    """The delivery error's name of one record to `topic` (None: delivered)."""
    errors = []
    producer = Producer({**client, "bootstrap.servers": bootstrap, "log_level": 0, "message.timeout.ms": 20000})
    producer.produce(topic, b"x", on_delivery=lambda err, _msg: errors.append(err and err.name()))
    producer.flush(30)
    return errors[0] if errors else "NOT REPORTED"


def _connector(project, name: str, action: str = "status", method: str = "get") -> dict:
    out = project.outputs()
    creds = out["connect_credentials"]["central"]
    url = f"{out['connect']['central']}/connectors/{quote(name, safe='')}/{action}"
    reply = requests.request(method, url, timeout=20, auth=(creds["username"], creds["password"]))
    assert reply.ok, (url, reply.status_code, reply.text)
    return reply.json() if reply.content else {}


def _wait_for(what: str, check, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while (found := check()) is None or found is False:
        assert time.monotonic() < deadline, f"not within {timeout:.0f}s: {what}"
        time.sleep(1)
    return found


def _acl_change(admin, acl: Acl, grant: bool) -> None:
    futures = admin.create_acls([acl_binding(acl)]) if grant else admin.delete_acls([acl_filter(acl)])
    for future in futures.values():
        future.result(timeout=30)


def _stack_acl(out: dict, alias: str, acl: Acl) -> list[str]:
    """The parts of the flow the stack output says need `acl` on `alias`."""
    found = [parts for line in out["acls"][alias] for a, parts in [Acl.parse(line)] if a == acl]
    assert found, f"{acl} not in the stack's ACLs of {alias}"
    return found[0]


def _all_arrived(project, sent: list[str], part: str) -> None:
    """Every record of `sent` is on central, once (exactly-once): nothing lost while `part` was refused."""
    _wait_for("the source tasks running", lambda: all(
        t["state"] == "RUNNING" for t in _connector(project, SOURCE_TASKS)["tasks"]))
    arrived = consume(project.outputs()["clusters"]["central"], "edge.orders", expected=len(sent), timeout=180,
                      client={**_app(project, "reports-app"), "isolation.level": "read_committed"})
    assert sorted(r.value.decode() for r in arrived) == sorted(sent), part


def _healing(out: dict) -> dict:
    """The supervisor's series: (metric, connector) → value (connector None for the group's own)."""
    return supervisor_samples(requests.get(out["supervisors"]["central"], timeout=10).text)


def _target_write_refused_then_healed_by_the_supervisor(project, out, admins, writer, sent) -> None:
    """Target write revoked while records flow: the source task FAILS and the Connect
    group's supervisor restarts it on its schedule. Paused by a person, the connector is
    left alone, failed task and all; `refresh` records the ACL missing and the failed task
    (stack output `flows`). The right back and the connector resumed, the supervisor's
    next restart heals it, no `up` run: every record arrives once (read back by a read_committed
    client; the Spark job's own count on this stack is the first test's)."""
    acl = Acl("User:mirrorstack", "TOPIC", "edge.orders", "LITERAL", "WRITE")
    assert "flow edge->central: target write" in _stack_acl(out, "central", acl)
    restarts = lambda: _healing(out)[(RESTARTS_TOTAL, SOURCE_TASKS)]  # noqa: E731
    assert restarts() == 0
    _acl_change(admins["central"], acl, grant=False)
    sent += [r.value.decode() for r in produce(out["clusters"]["edge"], "orders", 20, prefix="unwritten", client=writer)]
    _wait_for("the supervisor restarting the refused source task", lambda: restarts() >= 1)
    log = (project.local_dir / "supervisor-central" / "service.log").read_text()
    assert re.search(rf"restarted the failed parts of {re.escape(SOURCE_TASKS)} \(restart 1 in a row.*"
                     r"TopicAuthorizationException", log), log[-3000:]

    # A person pauses it, a task FAILED (after the 2nd restart the next is 12 s away): held,
    # never restarted, however many checks pass.
    _wait_for("a 2nd restart", lambda: restarts() >= 2)
    _wait_for("a failed source task", lambda: "FAILED" in [t["state"] for t in _connector(project, SOURCE_TASKS)["tasks"]])
    _connector(project, SOURCE_TASKS, "pause", "put")
    _wait_for("the supervisor holding the paused connector", lambda: _healing(out)[(HELD, SOURCE_TASKS)] == 1)
    held = _healing(out)
    _wait_for("4 more checks", lambda: _healing(out)[(LAST_CHECK, None)] >= held[(LAST_CHECK, None)] + 4)
    assert restarts() == held[(RESTARTS_TOTAL, SOURCE_TASKS)]
    status = _connector(project, SOURCE_TASKS)
    assert status["connector"]["state"] == "PAUSED" and "FAILED" in [t["state"] for t in status["tasks"]], status
    # refresh (running the program, so the stack's outputs are read again): the ACL missing,
    # the flow's state as Connect has it now
    refreshed = project.run("refresh", "--yes", "--skip-preview", "--run-program", timeout=600)
    assert "1 ACLs missing" in refreshed.stdout + refreshed.stderr, refreshed.stdout[-3000:]
    state = project.outputs()["flows"]["edge->central"][SOURCE_TASKS]
    assert state["state"] == "PAUSED" and " FAILED on " in state.get("failed", ""), state

    # The right back, resumed by the person: the supervisor's next restart heals it, no `up`.
    _acl_change(admins["central"], acl, grant=True)
    before, started = restarts(), time.monotonic()
    _connector(project, SOURCE_TASKS, "resume", "put")
    _all_arrived(project, sent, "target write")
    assert restarts() > before
    print(f"\nhealed by the supervisor {time.monotonic() - started:.0f} s after the resume "
          f"({int(restarts())} restarts in all)")
    # `up` takes the stack's state past what the refresh recorded (the ACL missing, the failed task)
    project.run("up", "--yes", "--skip-preview", timeout=900)


def test_authorization_each_principal_gets_only_its_grants_and_mm2_breaks_without_any_of_its_own(secure):
    """Deny by default on both clusters: users without ACLs get nothing, applications
    exactly their grants, and MM2 replicates with only its derived ACLs: without the
    source read, the target write or the checkpoint group right a named part stops,
    and comes back (nothing lost) once the right is back."""
    project, _, _ = secure
    out = project.outputs()  # as deployed now (the first test added the validation's rights)
    local = project.local_dir
    edge, central = out["clusters"]["edge"], out["clusters"]["central"]
    writer, reader = _app(project, "orders-app"), _app(project, "reports-app")

    # No ACL: refused on both clusters (and the topics are invisible to them).
    for name, bootstrap, topic in (("newcomer-edge", edge, "orders"), ("newcomer-central", central, "edge.orders")):
        assert _produce_error(bootstrap, topic, _app(project, name)) == "TOPIC_AUTHORIZATION_FAILED", name
        assert topic not in AdminClient({**_app(project, name), "bootstrap.servers": bootstrap}
                                        ).list_topics(timeout=20).topics
    # Applications: what their section grants, nothing more.
    assert _produce_error(central, "edge.orders", reader) == "TOPIC_AUTHORIZATION_FAILED"  # reads only
    writer_admin = AdminClient({**writer, "bootstrap.servers": edge})  # kept: a dropped client cancels its calls
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        writer_admin.create_topics([NewTopic("audit", 1, 1)])["audit"].result(timeout=30)
    assert _produce_error(edge, "orders", writer) is None

    # MM2 has no write right on its source at all (offset syncs live on the target).
    mm2 = "User:mirrorstack"
    assert not [line for line in out["acls"]["edge"] if line.startswith(f"allow {mm2} WRITE")]
    admins = {"edge": node_admin(local, "edge"), "central": node_admin(local, "central")}
    # What central holds now: the first test's records and the one just written.
    sent = [r.value.decode() for r in consume(central, "edge.orders", expected=RECORDS + 1, timeout=120, client={
        **_app(project, "reports-app"), "isolation.level": "read_committed"})]
    assert "x" in sent and len(sent) == RECORDS + 1

    # Source read: MM2's consumer is refused (the task logs it and polls on); records wait on edge
    # and follow by themselves once the right is back.
    acl = Acl(mm2, "TOPIC", "orders", "LITERAL", "READ")
    assert "flow edge->central: source read" in _stack_acl(out, "edge", acl)
    log = next((local / "connect-central-0").glob("*.log"))
    refusals = log.read_text(errors="ignore").count("TopicAuthorizationException")
    _acl_change(admins["edge"], acl, grant=False)
    sent += [r.value.decode() for r in produce(edge, "orders", 20, prefix="unread", client=writer)]
    _wait_for("MM2's consumer refused on edge", lambda: log.read_text(errors="ignore").count(
        "TopicAuthorizationException") > refusals)
    _acl_change(admins["edge"], acl, grant=True)
    _all_arrived(project, sent, "source read")

    _target_write_refused_then_healed_by_the_supervisor(project, out, admins, writer, sent)

    # Checkpoints: a group that consumed on edge is checkpointed; without the right to
    # describe groups on edge the checkpoint connector finds none and stops.
    consumer = Consumer({**writer, "bootstrap.servers": edge, "group.id": "billing", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe(["orders"])
    _wait_for("billing reads orders", lambda: [m for m in consumer.consume(100, 1.0) if not m.error()] or None)
    consumer.commit(asynchronous=False)
    consumer.close()
    checkpoint_tasks = lambda: _connector(project, CHECKPOINTS).get("tasks", [])  # noqa: E731
    _wait_for("a checkpoint task for group billing", lambda: checkpoint_tasks() or None)
    acl = Acl(mm2, "GROUP", "*", "LITERAL", "DESCRIBE")
    assert "flow edge->central: checkpoints" in _stack_acl(out, "edge", acl)
    _acl_change(admins["edge"], acl, grant=False)
    _wait_for("the checkpoint connector without groups", lambda: checkpoint_tasks() == [])
    _acl_change(admins["edge"], acl, grant=True)
    _wait_for("a checkpoint task again", lambda: checkpoint_tasks() or None)


def _resource_diff(diff: str, name: str) -> str:
    """The part of `preview --diff` that shows the resource named `name` (its properties)."""
    start = re.search(rf"\[urn=\S+-{re.escape(name)}\]\n", diff)
    assert start, diff
    ends = [i for i in (diff.find("[urn=", start.end()), diff.find("\nOutputs:", start.end())) if i != -1]
    return diff[start.end():min(ends, default=len(diff))]


def test_preview_diff_shows_the_acls_a_topics_change_adds_and_removes(secure):
    """A reviewer sees every right a change grants or takes away, with the parts that
    need it, before anything is applied: payments out of the flow, refunds in. Each ACL
    added or removed is a line of its own (`+`/`-`), never a pair of unrelated lines
    shifted by position (`~ [1]: "allow …" => "allow …"`, issue 46)."""
    project, _, _ = secure
    acls = project.outputs()["acls"]  # as deployed now (the first test added the validation's rights)
    stack_file = project.dir / "stacks" / "Pulumi.secure.yaml"
    before = stack_file.read_text()
    try:
        _set_topology(project, lambda t: t["flows"][0].update(topics=["orders", "refunds"]))
        diff = project.run("preview", "--diff", timeout=600).stdout
    finally:
        stack_file.write_text(before)
    mm2 = "User:mirrorstack"
    gone = {alias: [line for line in acls[alias] if "payments " in line and line.startswith(f"allow {mm2} ")]
            for alias in ("edge", "central")}
    assert gone["edge"] and gone["central"], acls
    shown = {alias: _resource_diff(diff, f"{alias}-acls") for alias in ("edge", "central")}
    for alias, lines in gone.items():
        for line in lines:  # the right as deployed, shown going, with the parts that needed it
            acl, parts = Acl.parse(line)
            assert re.search(rf'^\s+- "?{re.escape(acl.text())}"?\s*: "{re.escape(", ".join(parts))}"$', shown[alias],
                             re.M), (alias, line, shown[alias])
    for alias, line in (("edge", f"allow {mm2} READ on TOPIC refunds (LITERAL) for flow edge->central: source read"),
                        ("central", f"allow {mm2} WRITE on TOPIC edge.refunds (LITERAL) for flow edge->central: "
                                    "target write")):
        acl, (part, *_) = Acl.parse(line)
        assert re.search(rf'^\s+\+ "?{re.escape(acl.text())}"?\s*: "{re.escape(part)}', shown[alias], re.M), \
            (line, shown[alias])
    for alias in ("edge", "central"):  # updated in place, the node's key never shown, no index-shifted pair
        assert re.search(rf"~ pulumi-python:dynamic/kafka:KafkaAcls: \(update\)\n\s+\[id=\w+\]\n\s+"
                         rf"\[urn=\S+-{alias}-acls\]", diff), diff
        assert not re.search(r"\[\d+\]: ", shown[alias]), shown[alias]
        assert not re.search(r'^\s+~ "?allow ', shown[alias], re.M), shown[alias]  # no kept ACL shown changed
    assert "PRIVATE KEY" not in diff and len(re.findall(r"admin_keystore\s*: \[secret\]", diff)) == 2, diff
    assert "to replace" not in diff, diff


# ---------------------------------------------------------------- certificate lifecycle

CLUSTERS = ("edge", "central")
FEW = 300


def _certs(project) -> dict:
    return project.outputs()["certificates"]


def _nodes(certs: dict, alias: str) -> list[str]:
    """The cluster's nodes, as its certificates name them (controllers and brokers)."""
    return sorted(name for name in certs[alias]["certificates"] if name != "client")


def _keystore(local: Path, node: str) -> str:
    return (local / node / "secrets" / "server.pem").read_text()


def _set_topology(project, change) -> None:
    """Edit the stack's topology as a user edits the stack file."""
    stack_file = project.dir / "stacks" / "Pulumi.secure.yaml"
    document = yaml.safe_load(stack_file.read_text())
    change(document["config"]["mirrorstack:topology"])
    stack_file.write_text(yaml.safe_dump(document))


def _replicated(project, topic: str, sent: list, total: int, timeout: float = 240) -> None:
    """Every record of `sent` arrived in central, whose copy of `topic` then
    holds `total` records (read_committed: the flow is exactly-once)."""
    local, central = project.local_dir, project.outputs()["clusters"]["central"]
    client = {**_app(project, "reports-app"), "isolation.level": "read_committed"}
    wanted = {r.value if hasattr(r, "value") else r for r in sent}
    arrived = consume(central, f"edge.{topic}", expected=total, timeout=timeout, client=client)
    missing = wanted - {r.value for r in arrived}
    assert not missing, f"{len(missing)} of {len(wanted)} records never reached central; {_source_tasks(project)}"


def _source_tasks(project) -> str:
    """The flow's source task states as Connect reports them (a FAILED one with its
    trace's first line), to say why records did not arrive."""
    out = project.outputs()  # with secrets
    creds = out["connect_credentials"]["central"]
    name = quote("edge->central.MirrorSourceConnector", safe="")
    status = connect_rest.read(f"{out['connect']['central']}/connectors/{name}/status",
                               auth=(creds["username"], creds["password"]))
    return "source tasks: " + "; ".join(f"{t['id']} {t['state']} {(t.get('trace') or '').splitlines()[:1]}"
                                        for t in status.get("tasks", []))


def _changed_in_preview(diff: str) -> dict[str, tuple[str, str]]:
    """name → (operation, type) of each resource `preview --diff` shows changing."""
    found = {}
    for kind, operation, urn in re.findall(r"^\s*(?:[~+-]+ )?([\w./:-]+): \(([\w-]+)\)\n(?:\s+\[id=[^\]\n]*\]\n)?"
                                           r"\s+\[urn=(\S+)\]", diff, re.M):
        if operation != "same" and kind != "pulumi:pulumi:Stack":
            found[urn.rsplit("::", 1)[1]] = (operation, kind)
    return found


def _service_starts(project) -> dict[str, tuple]:
    """Each local service's (pid, start time) as the state records them: an update restarts it."""
    exported = json.loads(project.run("stack", "export").stdout)["deployment"]["resources"]
    return {outs["name"]: (outs.get("pid"), outs.get("start_time")) for r in exported if "LocalService" in r["type"]
            for outs in [r.get("outputs") or {}]}


def test_up_inside_the_renewal_window_renews_every_certificate_one_node_at_a_time(secure):
    """Also a roll after a SCRAM principal's rename (issue 46): the user removed comes first in
    Kafka's replay, which dropped every SCRAM user of the restarted broker when it was deleted.
    The rename itself previews and restarts no broker, controller or Connect worker (issue 46:
    a SCRAM principal added previewed `~ 6 to update`, every broker among them)."""
    project, out, tmp_path = secure
    local = project.local_dir
    before = _certs(project)
    nodes_of = {alias: _nodes(before, alias) for alias in CLUSTERS}
    pids = {n: kafka_node(local, n) for nodes in nodes_of.values() for n in nodes}
    services = _service_starts(project)
    assert any(name.startswith("connect-") for name in services) and set(pids) <= set(services), services
    _set_topology(project, lambda t: t["principals"].update({"newcomer-edge2": t["principals"].pop("newcomer-edge")}))
    changed = _changed_in_preview(project.run("preview", "--diff", timeout=600).stdout)
    # only the users' side: edge's ACL resource (it sets and retires SCRAM users) and the two passwords
    assert {name.removeprefix("secure-"): operation for name, (operation, _) in changed.items()} == {
        "edge-acls": "update", "edge-newcomer-edge2-password": "create",
        "edge-newcomer-edge-password": "delete"}, changed
    renamed = project.run("up", "--yes", "--skip-preview", timeout=900)
    assert "users removed: newcomer-edge" in renamed.stdout + renamed.stderr
    assert _service_starts(project) == services  # no service updated ...
    assert {n: kafka_node(local, n) for n in pids} == pids  # ... nor any node's JVM restarted
    assert re.fullmatch(r"([0-9A-F]{2}:){31}[0-9A-F]{2}", before["edge"]["ca"]["fingerprint_sha256"])

    # 340 days on: inside the 30-day window of certificates valid 365 days
    # --json: the engine's events (each step's start and end) as JSON lines on stdout
    done = project.run("up", "--yes", "--skip-preview", "--json", timeout=900, env={CLOCK_OFFSET_ENV: "340"})
    events = tmp_path / "renewal-events.jsonl"
    events.write_text(done.stdout)
    said = done.stdout + done.stderr
    assert "mirrorstack: edge certificates: done: renew edge-broker-0's certificate" in said, said[-3000:]
    after = _certs(project)
    for alias, nodes in nodes_of.items():
        assert after[alias]["ca"] == before[alias]["ca"]  # same CA: no truststore changed
        for name in [*nodes, "client"]:
            old, new = before[alias]["certificates"][name], after[alias]["certificates"][name]
            assert new["serial"] != old["serial"] and new["not_after"] > old["not_after"], name
        for node in nodes:
            assert format(tls.leaf_of(_keystore(local, node)).serial_number, "x") == \
                after[alias]["certificates"][node]["serial"]
            assert kafka_node(local, node) != pids[node]  # the node took its new certificate
        # Rolling: every node was restarted, and no node's restart began before the one ahead of
        # it was healthy again (with a cluster's nodes chained, that holds for any number of brokers).
        windows = update_windows(events, nodes)
        assert set(windows) == set(nodes), windows
        assert overlapping_restarts(windows) == [], windows

    # After the roll the broker takes every SCRAM user of edge: the stack's own, and the principals
    edge_client = {**librdkafka_client(local, "edge", EDGE_MECHANISM), "bootstrap.servers": out["clusters"]["edge"]}
    assert _parallel(partial(_refused, {**edge_client, **conf}) for conf in (
        {}, _app(project, "orders-app"), _app(project, "newcomer-edge2"))) == [False, False, False]
    writer = _app(project, "orders-app")
    create_topic(out["clusters"]["edge"], "payments", partitions=3, replication_factor=1, client=writer)
    sent = produce(out["clusters"]["edge"], "payments", FEW, prefix="renewed", client=writer)
    _replicated(project, "payments", sent, total=FEW)


class _Producer(threading.Thread):
    """A user's app: writes a record every 50 ms, counting failed deliveries."""

    def __init__(self, bootstrap: str, client: dict, topic: str):
        super().__init__(daemon=True)
        # A one-broker cluster's partitions are offline while its broker restarts: the app rides
        # out a roll on a loaded machine (librdkafka's default gives up on a record after 300 s).
        self.producer = Producer({**client, "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "message.timeout.ms": 900_000})
        self.topic, self.sent, self.delivered, self.failed = topic, [], [], []
        self.delivered_at: list[float] = []
        self.stop = threading.Event()

    def _report(self, err, msg) -> None:
        (self.failed if err else self.delivered).append(err or msg.value())
        if not err:
            self.delivered_at.append(time.time())

    def longest_gap(self) -> float:
        """The longest time without a delivery: how long the app saw the cluster down."""
        times = sorted(self.delivered_at)
        return max((b - a for a, b in zip(times, times[1:])), default=0.0)

    def run(self) -> None:
        while not self.stop.is_set():
            value = f"rotation-{len(self.sent)}".encode()
            self.producer.produce(self.topic, value, key=value, on_delivery=self._report)
            self.sent.append(value)
            self.producer.poll(0)
            time.sleep(0.05)
        self.producer.flush(120)


def test_ca_rotation_completes_with_clients_connected_throughout(secure):
    """edge's CA rotates (SCRAM clients, the app writing throughout, Connect reading it); central,
    not rotated, is not touched: no node of it restarts, no certificate of it changes. (The
    rotation is per cluster and the same code for both; one cluster keeps 3 rolls of 2 nodes out
    of the suite's time.)"""
    project, _, tmp_path = secure
    local = project.local_dir
    before = _certs(project)
    # Rotated before the broker is added (the next test): each roll then restarts one node fewer.
    nodes = {"edge": _nodes(before, "edge")}
    central_starts = {name: started for name, started in _service_starts(project).items()
                      if name.startswith("central-")}
    assert central_starts and all(pid for pid, _ in central_starts.values()), central_starts
    central_jvms = {name: kafka_node(local, name) for name in _nodes(before, "central")}

    def rotate(topology):
        for alias in nodes:
            topology["clusters"][alias]["security"]["certificates"] = {"ca_generation": 2}
    _set_topology(project, rotate)
    first = project.run("up", "--yes", "--skip-preview", timeout=900)
    assert "next `pulumi up`: re-issue every certificate with the new CA" in first.stdout + first.stderr
    one = _certs(project)
    for alias in nodes:
        assert one[alias]["rotation_phase"] == "trusting-new-ca"
        assert one[alias]["trusted_cas"][0] == before[alias]["ca"]["fingerprint_sha256"]
        assert len(one[alias]["trusted_cas"]) == 2 and one[alias]["certificates"] == before[alias]["certificates"]
    preview = project.run("preview")
    assert "pending: CA rotation phase 2/3" in preview.stdout + preview.stderr

    # The app (re)loads the client CA file now, as the runbook says: it holds both CAs.
    edge = project.outputs()["clusters"]["edge"]
    app = _Producer(edge, _app(project, "orders-app"), "payments")
    app.start()
    windows = {}
    try:
        for phase in (2, 3):  # 2/3: new certificates; 3/3: old CA dropped
            done = project.run("up", "--yes", "--skip-preview", "--json", timeout=900)
            events = tmp_path / f"rotation-{phase}-events.jsonl"
            events.write_text(done.stdout)
            windows[phase] = {n: end - begin for n, (begin, end) in update_windows(events, nodes["edge"]).items()}
            if phase == 2:
                assert _certs(project)["edge"]["rotation_phase"] == "reissued-by-new-ca"
        # and the app goes on writing with only the new CA trusted: records sent after the
        # rotation ended are delivered too
        after_rotation, deadline = len(app.sent) + 20, time.monotonic() + 60
        while len(app.delivered) < after_rotation and time.monotonic() < deadline and app.is_alive():
            time.sleep(0.1)
    finally:
        app.stop.set()
        app.join(180)
    # what the app saw: the edge nodes' restarts (seconds each, per phase) and its longest wait
    print(f"\nCA rotation: edge restarts {windows}, the app's longest wait for a delivery {app.longest_gap():.0f}s")
    assert app.failed == [] and len(app.delivered) == len(app.sent) > 100, \
        (app.failed[:5], len(app.failed), len(app.delivered), len(app.sent), windows, app.longest_gap())
    _replicated(project, "payments", app.sent, total=FEW + len(app.sent))

    after = _certs(project)
    for alias, names in nodes.items():
        new_ca = after[alias]["ca"]["fingerprint_sha256"]
        assert new_ca == one[alias]["trusted_cas"][1] != before[alias]["ca"]["fingerprint_sha256"]
        assert after[alias]["trusted_cas"] == [new_ca] and after[alias]["rotation_phase"] == "none"
        for node in names:
            trusted = (local / node / "secrets" / "ca.pem").read_text()
            assert [tls.fingerprint(c) for c in tls.certificates_in(trusted)] == [new_ca]
            assert tls.signed_by(tls.leaf_of(_keystore(local, node)), trusted), node
    # central, not rotated: the same CA, certificates and nodes (same pid, same start) as before
    assert after["central"] == before["central"]
    assert {name: started for name, started in _service_starts(project).items()
            if name.startswith("central-")} == central_starts
    assert {name: kafka_node(local, name) for name in central_jvms} == central_jvms
    central_client = (local / "clients" / "central" / "client.pem").read_text()
    assert tls.signed_by(tls.leaf_of(central_client), (local / "clients" / "central" / "ca.pem").read_text())


def test_adding_a_broker_issues_its_certificate_under_the_clusters_current_ca(secure):
    """After the rotation (the test before): the new broker's certificate comes from the
    new CA, the only one its cluster trusts, and no other node is touched."""
    project, _, _ = secure
    local = project.local_dir
    before, broker0 = _certs(project), _keystore(local, "edge-broker-0")
    assert before["edge"]["rotation_phase"] == "none"
    # validation off: edge's new bootstrap would re-run the Spark job over the rotation's records for nothing
    _set_topology(project, lambda t: (t["clusters"]["edge"].update(brokers=2), t.pop("validation", None)))
    project.run("up", "--yes", "--skip-preview", timeout=900)
    after = _certs(project)
    assert after["edge"]["ca"]["fingerprint_sha256"] == before["edge"]["ca"]["fingerprint_sha256"]
    assert _keystore(local, "edge-broker-0") == broker0  # byte for byte
    assert after["edge"]["certificates"]["edge-broker-0"] == before["edge"]["certificates"]["edge-broker-0"]
    assert after["central"] == before["central"]
    new = tls.leaf_of(_keystore(local, "edge-broker-1"))
    trusted = (local / "edge-broker-1" / "secrets" / "ca.pem").read_text()
    assert [tls.fingerprint(c) for c in tls.certificates_in(trusted)] == [after["edge"]["ca"]["fingerprint_sha256"]]
    assert tls.signed_by(new, trusted) and trusted == (local / "edge-broker-0" / "secrets" / "ca.pem").read_text()
    assert after["edge"]["trusted_cas"] == [after["edge"]["ca"]["fingerprint_sha256"]]
    edge = project.outputs()["clusters"]["edge"]
    brokers = AdminClient({**librdkafka_client(local, "edge", EDGE_MECHANISM), "bootstrap.servers": edge}
                          ).list_topics(timeout=20).brokers
    assert len(brokers) == 2


def test_refresh_with_broker_0_down_reads_the_acls_through_another_broker(secure):
    """Issue 46, defect 4: the ACL resource was given broker 0 alone, so `pulumi refresh` failed
    while it was down (exit 1 after 31 s, "Failed while waiting for controller: Local: Timed
    out"). edge has 2 brokers since the test before: broker 0 stopped, refresh reads edge's ACLs
    through broker 1 and keeps them all; `up` starts broker 0 again."""
    project, _, _ = secure
    local, out = project.local_dir, project.outputs()  # edge's bootstrap: both brokers now
    acls = out["acls"]["edge"]
    broker0 = kafka_node(local, "edge-broker-0")
    os.kill(broker0, signal.SIGKILL)  # a local broker has no keeper: it stays down until `up`
    edge = {**librdkafka_client(local, "edge", EDGE_MECHANISM), "bootstrap.servers": out["clusters"]["edge"]}
    # until the controller fenced it (broker.session.timeout.ms): before that, metadata may still
    # name broker 0 as the one to send the ACL requests to
    _wait_for("edge's metadata without broker 0", lambda: len(
        AdminClient({**edge, "log_level": 0}).list_topics(timeout=10).brokers) == 1, timeout=60)
    try:
        refreshed = project.run("refresh", "--yes", "--skip-preview", timeout=600)
        said = refreshed.stdout + refreshed.stderr
        assert "edge-broker-0 is down" in said, said[-3000:]  # the refresh saw the outage ...
        assert "Failed while waiting for controller" not in said and "edge ACLs: no broker" not in said, said[-3000:]
        assert "ACLs missing" not in said, said[-3000:]  # ... and read every ACL through broker 1
        (kept,) = [r["outputs"]["acls"] for r in json.loads(project.run("stack", "export").stdout)["deployment"][
            "resources"] if r["urn"].endswith("-edge-acls")]
        assert lines_of(kept) == acls
    finally:
        project.run("up", "--yes", "--skip-preview", timeout=900)
    assert kafka_node(local, "edge-broker-0") != broker0
