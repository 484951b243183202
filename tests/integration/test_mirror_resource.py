"""The MirrorMaker2 provider class against a real Connect worker (under the
engine it is pickled and driven the same way; here each CRUD step is checked)."""
import re
import socket
import time

import pytest

from mirrorstack.connect.api import ConnectClient, ConnectError
from mirrorstack.mirror.connectors import mirror_connector_configs
from mirrorstack.mirror.provider import MirrorMaker2Provider
from mirrorstack.model.spec import load_topology
from tests.support.kafka_clients import consume, create_topic, produce

pytestmark = pytest.mark.integration


def _props(kafka_a, kafka_b, connect_b, **flow):
    topology = load_topology({"clusters": {"src": {"brokers": 2}, "dst": {"brokers": 1}},
                              "flows": [{"source": "src", "target": "dst", **flow}]})
    f = topology.flows[0].description()
    configs = mirror_connector_configs(f, replication_factor=1, source_bootstrap=kafka_a.bootstrap_servers,
                                       target_bootstrap=kafka_b.bootstrap_servers)
    return {"flow": f.name, "connect_url": connect_b.rest_url, "connectors": configs,
            "timeout_seconds": "120", "restart_trigger": ""}


def test_lifecycle_create_read_repair_delete(kafka_a, kafka_b, connect_b):
    create_topic(kafka_a.bootstrap_servers, "payments", partitions=2, replication_factor=2)
    sent = produce(kafka_a.bootstrap_servers, "payments", 500)
    props = _props(kafka_a, kafka_b, connect_b, topics=["payments"])
    provider = MirrorMaker2Provider()
    client = ConnectClient(connect_b.rest_url)
    names = list(props["connectors"])

    created = provider.create(props)
    assert created.id == "src->dst"
    assert {s["state"] for s in created.outs["states"].values()} == {"RUNNING"}
    assert len(consume(kafka_b.bootstrap_servers, "src.payments", expected=500, timeout=120)) == len(sent)

    # unchanged inputs: no diff
    assert provider.diff(created.id, created.outs, props).changes is False

    # a connector deleted out of band: read sees it, diff wants an update, update repairs
    client.delete(names[1])
    live = provider.read(created.id, created.outs).outs
    assert names[1] not in live["connectors"] and live["states"][names[1]]["state"] == "MISSING"
    assert provider.diff(created.id, live, props).changes is True
    repaired = provider.update(created.id, live, props)
    assert client.get_config(names[1]) == props["connectors"][names[1]]
    assert repaired.outs["states"][names[1]]["state"] == "RUNNING"

    # a changed flow name replaces; a changed config only updates
    assert provider.diff(created.id, repaired.outs, {**props, "flow": "other"}).replaces == ["flow"]

    # a new restart trigger (mm2.sh's redeploy) restarts the connectors in place
    redeploy = {**props, "restart_trigger": "2026-11-22"}
    assert provider.diff(created.id, repaired.outs, redeploy).changes is True
    restarted = provider.update(created.id, repaired.outs, redeploy)
    assert {s["state"] for s in restarted.outs["states"].values()} == {"RUNNING"}
    log = "\n".join(p.read_text() for p in connect_b.base_dir.glob("worker-*.log"))
    assert "/restart?includeTasks=true" in log

    provider.delete(created.id, restarted.outs)
    assert [client.get_config(n) for n in names] == [None, None, None]


def test_connect_rejects_a_bad_config_with_its_own_message(kafka_a, kafka_b, connect_b):
    props = _props(kafka_a, kafka_b, connect_b)
    # Past the model (which refuses overriding this key): what Connect itself says.
    props["connectors"]["src->dst.MirrorSourceConnector"]["replication.policy.class"] = "no.such.Policy"
    with pytest.raises(ConnectError, match=r"(?s)rejected.*src->dst.MirrorSourceConnector: replication.policy.class"):
        MirrorMaker2Provider().create(props)
    assert ConnectClient(connect_b.rest_url).get_config("src->dst.MirrorSourceConnector") is None


def test_unreachable_connect_fails_naming_the_url_after_bounded_retries(kafka_a, kafka_b, connect_b):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    props = {**_props(kafka_a, kafka_b, connect_b), "connect_url": dead}
    started = time.monotonic()
    with pytest.raises(ConnectError, match=f"Kafka Connect at {dead} is unreachable"):
        MirrorMaker2Provider().create(props)
    assert time.monotonic() - started < 60


def test_a_rotated_secret_restarts_the_connectors_without_touching_their_configs(kafka_a, kafka_b, connect_b):
    create_topic(kafka_a.bootstrap_servers, "secretive", partitions=1, replication_factor=1)
    props = _props(kafka_a, kafka_b, connect_b, topics=["secretive"], checkpoints=False, heartbeats=False)
    (name,) = props["connectors"]
    props["secrets_digest"] = "digest-1"  # secrets live in 0600 files Connect reads; configs reference them
    provider, client = MirrorMaker2Provider(), ConnectClient(connect_b.rest_url)
    created = provider.create(props)
    restarts = re.compile(r"POST /connectors/[^ ]*/restart\?includeTasks=true&onlyFailed=false")
    logs = lambda: sum(len(restarts.findall(p.read_text(errors="ignore")))  # noqa: E731
                       for p in connect_b.base_dir.glob("worker-*.log"))
    try:
        read = provider.read(created.id, created.outs)
        assert read.outs["connectors"][name] == props["connectors"][name]
        assert provider.diff(created.id, read.outs, props).changes is False
        before = logs()
        rotated = {**props, "secrets_digest": "digest-2"}
        assert provider.diff(created.id, read.outs, rotated).changes is True
        provider.update(created.id, read.outs, rotated)
        assert logs() == before + 1  # restarted so the workers re-read the `${file:...}` values
        assert client.get_config(name) == {**props["connectors"][name]}  # and its config untouched
    finally:
        provider.delete(created.id, created.outs)


def test_a_connector_deleted_behind_the_stack_while_it_starts_is_named_with_the_likely_cause(kafka_a, kafka_b,
                                                                                               connect_b):
    """What an operator that deletes REST-made connectors (Strimzi with
    use-connector-resources) looks like from `up`: a clear error, not a timeout."""
    from mirrorstack.connect.api import wait_running
    props = _props(kafka_a, kafka_b, connect_b, topics=["vanishing"], checkpoints=False, heartbeats=False)
    (name, config), = props["connectors"].items()
    client = ConnectClient(connect_b.rest_url)
    client.put_config(name, config)
    client.delete(name)  # as the operator's reconcile loop does, right after
    started = time.monotonic()
    with pytest.raises(ConnectError, match=r"vanished from Kafka Connect .* strimzi.io/use-connector-resources"):
        wait_running(client, [name], timeout=120)
    assert time.monotonic() - started < 30  # long before the 120 s wait bound


def test_flow_state_paused_stopped_running_and_a_hand_pause_repaired(kafka_a, kafka_b, connect_b, capsys):
    """A flow created paused copies nothing; stopped it holds no task; running
    again it copies what was held; paused by hand it is a diff, and the update
    resumes it, saying so."""
    create_topic(kafka_a.bootstrap_servers, "held", partitions=1, replication_factor=1)
    props = _props(kafka_a, kafka_b, connect_b, topics=["held"], checkpoints=False, refresh_seconds=5)
    provider, client = MirrorMaker2Provider(), ConnectClient(connect_b.rest_url)
    names = list(props["connectors"])  # source and heartbeat: the heartbeat connector follows the state too
    paused = {**props, "state": "paused"}
    created = provider.create(paused)
    try:
        assert {s["state"] for s in created.outs["states"].values()} == {"PAUSED"}
        produce(kafka_a.bootstrap_servers, "held", 50, prefix="while-paused")
        # stopped: every task gone (KIP-875), offsets kept
        stopped = {**props, "state": "stopped"}
        assert provider.diff(created.id, created.outs, stopped).changes is True
        done = provider.update(created.id, created.outs, stopped)
        assert {(s["state"], s["tasks"]) for s in done.outs["states"].values()} == {("STOPPED", "0")}
        assert provider.diff(created.id, done.outs, stopped).changes is False
        assert consume(kafka_b.bootstrap_servers, "src.held", expected=1, timeout=5) == []  # nothing copied
        # running: what was produced meanwhile arrives
        running = provider.update(created.id, done.outs, props)
        assert {s["state"] for s in running.outs["states"].values()} == {"RUNNING"}
        assert len(consume(kafka_b.bootstrap_servers, "src.held", expected=50, timeout=120)) == 50
        # paused by hand: the diff sees it live, the update resumes it and says so
        client.pause(names[0])
        deadline = time.monotonic() + 30
        while (client.status(names[0]) or {})["connector"]["state"] != "PAUSED" and time.monotonic() < deadline:
            time.sleep(0.5)
        capsys.readouterr()
        assert provider.diff(created.id, running.outs, props).changes is True
        assert f"{names[0]} is PAUSED, changed outside the stack" in capsys.readouterr().err
        repaired = provider.update(created.id, running.outs, props)
        assert f"{names[0]} on {connect_b.rest_url} is PAUSED, changed outside the stack; the flow's state is " \
               "running: resuming it" in capsys.readouterr().err
        assert {s["state"] for s in repaired.outs["states"].values()} == {"RUNNING"}
        assert provider.diff(created.id, repaired.outs, props).changes is False
    finally:
        provider.delete(created.id, created.outs)

