"""`pulumi up --stack edge-push` through the real engine: Connect next to the
SOURCE produces across to a PLAINTEXT and a SASL_SSL (exactly-once) target;
then one flow moves to a Connect cluster next to its target without a record
copied twice. One stack, brought up once, asserted throughout."""
import time
import uuid

import pytest
import yaml

from mirrorstack.mirror.connectors import throughput_settings
from mirrorstack.model.spec import Flow
from tests.support import connect_rest
from tests.support.kafka_clients import committed_offsets, consume, consume_group, create_topic, produce, topic_names
from tests.support.secured import librdkafka_client, principal_client
from tests.support.stacks import stack_project

pytestmark = pytest.mark.integration

FIRST, MORE = 2_000, 1_000
STACK = "edge-push"


def _values(records) -> list:
    return sorted(r.value for r in records)


def _connectors(url: str) -> list[str]:
    return sorted(connect_rest.read(f"{url}/connectors"))


def _wait_translated(bootstrap: str, group: str, client: dict | None = None, timeout: float = 120) -> dict:
    """The group's committed offsets on the target, written there by MM2's checkpoint connector."""
    deadline = time.monotonic() + timeout
    while True:
        offsets = committed_offsets(bootstrap, group, "edge.orders", 3, client=client)
        if max(offsets.values()) > 0 or time.monotonic() > deadline:
            return offsets
        time.sleep(2)


def _validate(project, run_id: str) -> dict:
    project.run("up", "--yes", "--skip-preview", "--config", f"mirrorstack:validationRunId={run_id}", timeout=900)
    return project.outputs()["validation"]


def test_push_flows_write_to_their_targets_and_a_move_copies_nothing_twice(tmp_path):
    with stack_project(STACK, tmp_path) as project:
        up = project.run("up", "--yes", "--skip-preview", timeout=900)
        out = project.outputs()
        edge, central, vault = (out["clusters"][a] for a in ("edge", "central", "vault"))
        vault_client = librdkafka_client(project.local_dir, "vault", "SCRAM-SHA-512")
        group = out["connect_groups"]["edge"]
        assert group == f"mirrorstack-{STACK}-edge"  # the stack is part of a new group's id
        assert f"{group}-configs" in topic_names(edge)
        connect_edge = out["connect"]["edge"]
        assert len(_connectors(connect_edge)) == 6 and "deprecated" not in up.stdout

        # The worker lets connectors override exactly the settings push needs.
        worker = (project.local_dir / "connect-edge-0" / "worker.properties").read_text()
        assert "connector.client.config.override.policy=Allowlist" in worker
        allowlist = next(line for line in worker.splitlines() if line.startswith("connector.client.config.override.allowlist"))
        speed = throughput_settings(Flow(source="edge", target="x").description())
        tuning = {k.removeprefix("producer.override.") for k in speed
                  if k.startswith("producer.override.")}  # the flows' speed settings, also producer overrides
        assert set(allowlist.split("=", 1)[1].split(",")) == {
            "bootstrap.servers", "sasl.jaas.config", "sasl.mechanism", "security.protocol", "ssl.truststore.location",
            "ssl.truststore.type", *tuning}

        create_topic(edge, "orders", 3, 1)
        sent = produce(edge, "orders", FIRST, prefix="first")
        consume_group(edge, "orders", "billing", 500)  # a group whose offsets must be translated
        assert _values(consume(central, "edge.orders", FIRST, timeout=300)) == _values(sent)
        reader = out["principal_credentials"]["vault-reader"]  # vault denies by default
        vault_read = {**principal_client(project.local_dir, "vault", "SCRAM-SHA-512", reader),
                      "isolation.level": "read_committed", "group.id": f"readers-{uuid.uuid4().hex}"}
        assert _values(consume(vault, "edge.orders", FIRST, timeout=300, client=vault_read)) == _values(sent)

        # Translated offsets of `billing` land on both targets (checkpoints + offset sync there).
        assert max(_wait_translated(central, "billing").values()) > 0
        assert max(_wait_translated(vault, "billing", vault_client).values()) > 0
        assert {"edge.checkpoints.internal", "heartbeats", "mm2-offset-syncs.edge.internal"} <= topic_names(central)
        assert {"edge.checkpoints.internal", "heartbeats", f"{group}-offsets"} <= topic_names(vault, vault_client)
        # The Connect cluster's own Kafka holds none of it: no remote topic, checkpoint or heartbeat.
        on_edge = topic_names(edge)
        assert not {"edge.orders", "edge.checkpoints.internal", "heartbeats"} & on_edge, on_edge
        # `.*` out of the cluster hosting the Connect group copies none of its storage topics.
        assert not [t for t in topic_names(central) if t.startswith(f"edge.{group}")]

        # Move edge->central to a Connect cluster next to central (pull): the old
        # connectors go, their offsets carry over, nothing is copied twice.
        stack_file = project.dir / "stacks" / f"Pulumi.{STACK}.yaml"
        document = yaml.safe_load(stack_file.read_text())
        document["config"]["mirrorstack:topology"]["flows"][0]["connect"] = "central"
        stack_file.write_text(yaml.safe_dump(document))
        preview = project.run("preview", "--diff").stdout
        assert "connect" in preview and "edge->central-connectors" in preview
        moved = project.run("up", "--yes", "--skip-preview", timeout=900)
        assert "source offsets carried over" in moved.stdout + moved.stderr
        out = project.outputs()
        assert [c for c in _connectors(connect_edge) if c.startswith("edge->central")] == []
        assert _connectors(out["connect"]["central"]) == [
            "edge->central.MirrorCheckpointConnector", "edge->central.MirrorHeartbeatConnector",
            "edge->central.MirrorSourceConnector"]
        sent += produce(edge, "orders", MORE, prefix="more")
        assert len(consume(central, "edge.orders", FIRST + MORE, timeout=300)) == FIRST + MORE
        assert len(consume(vault, "edge.orders", FIRST + MORE, timeout=300, client=vault_read)) == FIRST + MORE
        # one validation, after the move: every record of both flows, the move's too, once
        report = _validate(project, "push-2")
        assert report["passed"] is True, report
        for flow in ("edge->central", "edge->vault"):
            counts = report["flows"][flow]
            assert (counts["source_records"], counts["matched"], counts["missing"], counts["duplicates"]) == \
                (FIRST + MORE, FIRST + MORE, 0, 0), (flow, counts)
        project.run("destroy", "--yes", "--skip-preview", timeout=600)
