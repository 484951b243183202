"""Failover, failback and an unplanned failover through the real engine.

`primary` and `standby` are Kafka clusters this test starts and hands to the
stack as external clusters (so the test can kill the primary and the stack
cannot heal it, as in a lost data centre); the stack deploys a Connect group
next to the standby running both flows (primary->standby, and the reverse
flow standby->primary, pushed). One stack, brought up once:

0. a drill while a producer writes: copies of the groups written on the
   standby where the switch would put them, proved by record identity by the
   drill and again by the stack's Spark validation job, then deleted; a drill
   of a paused flow fails naming why;
1. each gate failure (an active consumer, records in flight, a stale
   checkpoint) fails `up` with its reason, and the stack is unchanged;
2. a planned failover moves two groups: each resumes on the standby at the
   copy of the first record it had not read (0 re-read, 0 lost, the first
   record each reads checked), where MM2's translation alone, shown beside it
   in the report, re-reads records it had read;
3. records produced on the standby meanwhile reach the primary exactly once
   (the Spark validation job of the stack counts them), the failback moves
   the groups back exactly too, nothing loops;
4. the primary's processes are killed; the unplanned switch says what is
   unknown; the groups resume on the standby with 0 lost among the records
   that had been replicated;
5. the primary comes back: removing `unplanned` counts what each group
   re-read and lost by record identity (the records taken after the last
   copy), as the groups' own reads say.

Both flows name topics with the separator "_" (`primary_orders`,
`primary_checkpoints_internal`): MM2's names under a separator other than "."
are what the gate, the switch and the validation job must find. Both are
exactly-once (transaction markers take offsets on the copies, so offsets alone
cannot place a group), with MM2's default offset.lag.max and thousands of
records; tests/integration/test_failover_ops.py moves groups exactly over
at-least-once flows.
"""
from __future__ import annotations

import json
import os
import re
import signal
import time
from functools import partial
from urllib.parse import quote

import pytest
import requests
from confluent_kafka import Consumer

from mirrorstack.failover import procedure as failover_ops
from mirrorstack.failover import rules
from mirrorstack.failover.clusters import offset_syncs
from mirrorstack.failover.drill import Drill, DrillFailed
from mirrorstack.failover.drill_report import render_drill
from mirrorstack.failover.drill_resource import FailoverDrillProvider, drill_spec
from tests.support import connect_rest
from tests.support.kafka_clients import SteadyProducer, committed_offsets, consume, create_topic, produce, topic_names
from tests.support.mm2_rounds import DEAD_SOURCE, refresh_marks, wait_for_refresh_rounds
from tests.support.services import KafkaCluster, _parallel
from tests.support.stacks import stack_project

pytestmark = pytest.mark.integration

PARTITIONS = 3
# records: on primary; while its flow is paused; past a fresh offset sync; on standby; before the loss
N, LAGGED, SYNCED, M, K = 2400, 30, 15, 90, 60
GROUPS = ("app-billing", "app-audit")
FORWARD, REVERSE = "primary->standby", "standby->primary"
SOURCE, CHECKPOINT = "MirrorSourceConnector", "MirrorCheckpointConnector"
FAILING_GATE_SECONDS = 4  # each failing case fails deterministically (a member, a paused connector); 2 gate looks
# The flows name remote and internal topics with "_" (`primary_orders`, `primary_checkpoints_internal`,
# `mm2-offset-syncs_primary_internal`): the gate, the switch and the validation must find MM2's names
# under any separator ("." is what every other stack uses).
SEP = "_"
PRIMARY_ORDERS, STANDBY_ORDERS = f"primary{SEP}orders", f"standby{SEP}orders"


def topology(primary: KafkaCluster, standby: KafkaCluster) -> dict:
    # checkpoints every 2 s; the primary is lost at the end: its connectors stop in seconds, not a minute
    checkpoints_fast = {"checkpoint": {"emit.checkpoints.interval.seconds": "2", **DEAD_SOURCE},
                        "source": DEAD_SOURCE}
    flow = {"connect": "standby", "topics": [".*"], "checkpoints": True, "heartbeats": False,
            "tasks_max": 1, "separator": SEP, "overrides": checkpoints_fast, "exactly_once": True}
    return {
        "platform": "local",
        "clusters": {alias: {"brokers": 1, "external": {"bootstrap_servers": c.bootstrap_servers}}
                     for alias, c in (("primary", primary), ("standby", standby))},
        "connect": {"standby": {"kafka": "standby", "push": True, "resources": {"heap": "512m"}}},
        "flows": [{"source": "primary", "target": "standby", **flow},
                  {"source": "standby", "target": "primary", **flow}],
        "failover": {"primary": "primary", "standby": "standby", "active": "primary", "groups": ["app-.*"],
                     "gate": {"wait_seconds": FAILING_GATE_SECONDS}},
    }


class Copies:
    """Where each record (by value, unique) sits: {value: {cluster: (topic, partition, offset)}}."""

    def __init__(self):
        self.at: dict[bytes, dict[str, tuple[str, int, int]]] = {}

    def produced(self, cluster: str, topic: str, records) -> list:
        for r in records:
            self.at.setdefault(r.value, {})[cluster] = (topic, r.partition, r.offset)
        return records

    def read_topic(self, cluster: str, bootstrap: str, topic: str, expected: int) -> None:
        records = consume(bootstrap, topic, expected, timeout=120)
        assert len(records) == expected, (cluster, topic, len(records), expected)
        for r in records:
            self.at.setdefault(r.value, {})[cluster] = (topic, r.partition, r.offset)

    def on(self, cluster: str) -> dict[bytes, tuple[str, int, int]]:
        return {v: where[cluster] for v, where in self.at.items() if cluster in where}


def read_group(bootstrap: str, group: str, topics: list[str], limit: int | None = None,
               timeout: float = 90) -> list:
    """Read as `group` (from its committed offsets, else the earliest) `limit`
    records, or to the end of every partition; commits what it read. Returns
    the messages' (topic, partition, offset, value)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
    consumer.subscribe(topics)
    read, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            wanted = 50 if limit is None else min(50, limit - len(read))
            for msg in consumer.consume(num_messages=wanted, timeout=1.0):
                if msg.error() is None:
                    read.append((msg.topic(), msg.partition(), msg.offset(), msg.value()))
            if limit is not None and len(read) >= limit:
                break
            if limit is None and _at_end(consumer):
                break
        else:
            raise AssertionError(f"{group} did not read {limit or 'to the end'} within {timeout:.0f}s: {len(read)}")
        if read:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return read


def _at_end(consumer: Consumer) -> bool:
    assigned = consumer.assignment()
    if not assigned:
        return False
    positions = consumer.position(assigned)
    committed = {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(assigned, timeout=10)}
    for tp in positions:
        low, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
        at = tp.offset if tp.offset >= 0 else committed.get((tp.topic, tp.partition), -1)
        if (at if at >= 0 else low) < high:
            return False
    return True


def moved(read: list, positions: dict[tuple[str, int], int], side: dict[bytes, tuple[str, int, int]]) -> tuple:
    """(re-read, lost) of a group that moved off `side` at `positions` (its
    committed offsets there; none: it had read nothing of that partition) and
    then read `read` on the other side: a record is re-read when it lay before
    the group's position on `side`; lost when it lay at or after it (so the
    group had not read it) and was not read now."""
    values = {m[3] for m in read}
    reread = sum(1 for m in read if m[3] in side and side[m[3]][2] < positions.get(side[m[3]][:2], 0))
    lost = [v for v, (t, p, o) in side.items() if o >= positions.get((t, p), 0) and v not in values]
    return reread, len(lost)


def assert_moved_exactly(entry: dict, read: list, positions: dict[tuple[str, int], int],
                         left: dict[bytes, tuple[str, int, int]], joined: dict[bytes, tuple[str, int, int]]) -> None:
    """A group moved exactly, as an independent consumer sees it: on each partition the first record it
    read (`read`, in order) is the one at its committed offset on the side left (none when it had read
    everything there), and the records between MM2's translated offset and the group's new one (what
    MM2's translation alone would re-read, `translated_reread` in the report) are all ones it had read."""
    at = {where: v for v, where in left.items()}
    first = {}
    for topic, p, _, value in read:
        first.setdefault((topic, p), value)
    for row in entry["partitions"]:
        came_from, went_to = (row["from_topic"], row["partition"]), (row["to_topic"], row["partition"])
        assert row["exact_by"] in ("identity", "end"), row
        assert first.get(went_to) == at.get((*came_from, positions[came_from])), (row, first.get(went_to))
        behind = [v for v, (t, p, o) in joined.items() if (t, p) == went_to and row["translated"] <= o < row["new"]]
        assert len(behind) == row["translated_reread"], (row, len(behind))
        assert all(left[v][2] < positions[came_from] for v in behind), row


def committed(bootstrap: str, group: str, topics: list[str]) -> dict[tuple[str, int], int]:
    out = {}
    for topic in topics:
        for p, offset in committed_offsets(bootstrap, group, topic, PARTITIONS).items():
            if offset >= 0:
                out[(topic, p)] = offset
    return out


def connector(url: str, name: str, action: str | None = None) -> str:
    """The connector's state on the Connect group at `url` (the stack's output
    connect.standby); `action` (pause/resume) first, by hand, as an operator would."""
    if action:
        requests.put(f"{url}/connectors/{quote(name, safe='')}/{action}", timeout=10).raise_for_status()
        want = {"pause": "PAUSED", "resume": "RUNNING", "stop": "STOPPED"}[action]
        deadline = time.monotonic() + 60
        while _state(url, name) != want:
            assert time.monotonic() < deadline, f"{name} not {want}"
            time.sleep(0.5)
    return _state(url, name)


def _state(url: str, name: str) -> str:
    """The connector's state once every task has reached it too: a paused
    connector's task may still copy what it polls until its own state says PAUSED."""
    status = connect_rest.read(f"{url}/connectors/{quote(name, safe='')}/status")
    state = status["connector"]["state"]
    return state if all(task["state"] == state for task in status.get("tasks", [])) else "CHANGING"


def wait_for_fresh_checkpoints(source: str, target: str, groups, timeout: float = 120) -> None:
    """Until MM2's latest checkpoint of each group's committed offset on `source`'s
    `orders` (the flow's topic) stands for that offset on `target`, by the gate's
    own rule (mirrorstack.failover.rules.checkpoint_fresh): checkpointing has
    caught up with the groups' last commits."""
    src = failover_ops.Cluster("primary", {"bootstrap": source})
    dst = failover_ops.Cluster("standby", {"bootstrap": target})
    deadline = time.monotonic() + timeout
    try:
        while True:
            marks = src.watermarks([("orders", p) for p in range(PARTITIONS)])
            checkpoints = failover_ops.latest_checkpoints(dst, f"primary{SEP}checkpoints{SEP}internal")
            syncs = failover_ops.offset_syncs(dst, f"mm2-offset-syncs{SEP}primary{SEP}internal")
            stale = {(group, p): (offset, checkpoints.get((group, PRIMARY_ORDERS, p)))
                     for group in groups for (topic, p), offset in src.committed(group).items()
                     if topic == "orders" and not marks[(topic, p)][0] == marks[(topic, p)][1] == offset
                     and not rules.checkpoint_fresh(offset, checkpoints.get((group, PRIMARY_ORDERS, p)),
                                                    syncs.get((topic, p)))}
            if not stale:
                return
            assert time.monotonic() < deadline, f"checkpoints not caught up within {timeout:.0f}s: {stale}"
            time.sleep(0.5)
    finally:
        src.close()
        dst.close()


def drill_while_writing(project, sites, copies: Copies, deployed: dict) -> None:
    """A drill while a producer writes: copies of the groups on the standby, where the switch would put
    them, proved by record identity and deleted; nothing real moves. Then a drill of a paused flow fails
    naming why, and the drill's RPO, measured on the live pair, counts what that flow has not copied."""
    primary, standby = sites["primary"].bootstrap_servers, sites["standby"].bootstrap_servers
    url = deployed["connect"]["standby"]
    names = (f"{FORWARD}.{SOURCE}", f"{FORWARD}.{CHECKPOINT}")
    configs = {n: connect_rest.read(f"{url}/connectors/{quote(n, safe='')}/config") for n in names}
    before = {g: committed(primary, g, ["orders"]) for g in GROUPS}
    project.run("config", "set", "--path", "mirrorstack:topology.failover.drill.run", "d1")
    # the stack's validation job over the flow, after the drill: it proves the copies' positions too
    project.run("config", "set", "--path", "mirrorstack:topology.validation.flows[0]", FORWARD)
    writer = SteadyProducer(primary, "payments", per_second=20)
    writer.start()
    try:
        up = project.run("up", "--yes", "--skip-preview", timeout=900)
    finally:
        writer.stop.set()
        writer.join()
    assert writer.delivered > 0 and not writer.errors, writer.errors
    out = project.outputs()
    drill = out["failover"]["drill"]
    print(render_drill(drill))  # the figures, with -s
    assert (drill["run"], drill["from"], drill["to"], drill["passed"]) == ("d1", "primary", "standby", True), drill
    assert "drill d1 primary -> standby" in up.stdout + up.stderr and "RTO:" in up.stdout + up.stderr
    assert drill["rto_seconds"] > 0 and 0 <= drill["rpo"]["seconds"] <= 60 and drill["rpo"]["records"] >= 0, drill
    by_offset = {w: v for v, w in copies.on("primary").items()}
    ends = group_ids(standby, ends=[(PRIMARY_ORDERS, p) for p in range(PARTITIONS)])
    for group in GROUPS:
        entry, proof = drill["groups"][group], drill["groups"][group]["proof"]
        assert proof["copy"] == f"mirrorstack-drill.d1.{group}" and (proof["reread"], proof["lost"]) == (0, 0), proof
        assert proof["compared"] > 0, proof  # each group had records left to read
        for row, proved in zip(entry["partitions"], proof["partitions"]):
            # the copy sat on the standby's copy of the first record its group had not read (an independent
            # read), or at the copy's end where it had read everything
            p = int(row["partition"])
            first_unread = by_offset.get(("orders", p, before[group][("orders", p)]))
            expected = copies.on("standby")[first_unread][2] if first_unread else ends[(PRIMARY_ORDERS, p)][1]
            assert int(proved["copy_at"]) == int(row["new"]) == expected, (row, proved)
    assert sum(drill["groups"][g]["translated_reread"] for g in GROUPS) > 0, drill  # MM2's alone re-reads
    # the validation job proved the same positions by identity on every record of the flow (Spark)
    proved = out["validation"]["flows"][FORWARD]
    assert out["validation"]["passed"] and proved["records_checked"] >= N, out["validation"]
    assert proved["positions"] == {f"mirrorstack-drill.d1.{g}": {
        "consumer_group": g, "label": "drill d1", "reread": 0, "lost": 0,
        "partitions": len(drill["groups"][g]["partitions"])} for g in GROUPS}, proved
    # where MM2's checkpoints alone would put the groups, the same job counts re-reads
    assert sum(proved["failover"][g]["reread"] for g in GROUPS) > 0, proved
    # nothing real moved: the groups' offsets, the connectors, the flows; the copies are gone
    assert {g: committed(primary, g, ["orders"]) for g in GROUPS} == before
    assert all(committed(standby, g, [PRIMARY_ORDERS]) == {} for g in GROUPS)
    assert not [g for g in group_ids(standby) if g.startswith("mirrorstack-drill.")]
    for name in names:
        assert connect_rest.read(f"{url}/connectors/{quote(name, safe='')}/config") == configs[name], name
        assert connector(url, name) == "RUNNING", name
    assert out["flows"] == deployed["flows"] and out["failover"]["active"] == "primary"

    # every record written so far is on the standby, then the flow is paused: what follows stays behind
    assert len(consume(standby, f"primary{SEP}payments", writer.delivered, timeout=60)) == writer.delivered
    connector(url, names[0], "pause")
    lagging = produce(primary, "payments", 12, prefix="lag")
    # (`up` would resume the connector first: the drill's own provider, as `up` runs it, on the paused flow)
    props = next(r["outputs"] for r in json.loads(project.run("stack", "export").stdout)["deployment"]["resources"]
                 if r["type"].endswith("FailoverDrill"))
    with pytest.raises(DrillFailed) as failed:
        FailoverDrillProvider().update("drill", props, {**props, "drill": {**props["drill"], "run": "d2",
                                                                            "wait_seconds": 3}})
    text = str(failed.value)
    assert "the failover drill d2 did not pass" in text and f"{names[0]} is PAUSED, not RUNNING" in text, text
    assert "no real group, connector or flow was touched" in text
    drilling = Drill(drill_spec(props), progress=print)
    pair = {a: failover_ops.Cluster(a, {"bootstrap": b}) for a, b in (("primary", primary), ("standby", standby))}
    try:
        syncs = offset_syncs(pair["standby"], drilling.flow.offset_syncs_topic())
        measured = drilling.copied(pair["primary"], pair["standby"], [("payments", p) for p in range(PARTITIONS)],
                                   syncs)
    finally:
        for cluster in pair.values():
            cluster.close()
    rpo = drilling.rpo(measured)
    assert rpo["records"] == len(lagging) and rpo["seconds"] > 0, rpo  # what the paused flow has not copied
    lag = drilling.rpo_problems({**rpo, "seconds": 3600.0})
    assert lag[0].startswith("RPO 3600.0s: records not yet on standby") and "payments/" in lag[0], lag
    assert not [g for g in group_ids(standby) if g.startswith("mirrorstack-drill.")]
    connector(url, names[0], "resume")
    project.run("config", "rm", "--path", "mirrorstack:topology.failover.drill")
    project.run("config", "rm", "--path", "mirrorstack:topology.validation")


def group_ids(bootstrap: str, ends=None):
    """The cluster's groups; with `ends` ((topic, partition) pairs), their watermarks instead."""
    cluster = failover_ops.Cluster("any", {"bootstrap": bootstrap})
    try:
        return cluster.watermarks(ends) if ends else cluster.group_ids()
    finally:
        cluster.close()


def failed_up(project) -> str:
    done = project.run("up", "--yes", "--skip-preview", check=False, timeout=600)
    text = done.stdout + done.stderr
    assert done.returncode != 0, text[-3000:]
    assert "the failover gate did not pass" in text and "nothing was changed" in text, text[-3000:]
    return text


@pytest.fixture
def sites(tmp_path):
    clusters = {alias: KafkaCluster(alias, tmp_path / alias) for alias in ("primary", "standby")}
    try:
        _parallel(c.start for c in clusters.values())
        yield clusters
    finally:
        _parallel(c.stop for c in clusters.values())


def test_failover_failback_and_unplanned_failover_through_the_stack(sites, tmp_path):
    primary, standby = sites["primary"].bootstrap_servers, sites["standby"].bootstrap_servers
    copies = Copies()
    for bootstrap in (primary, standby):
        create_topic(bootstrap, "orders", PARTITIONS, 1)
    create_topic(primary, "payments", PARTITIONS, 1)  # written while a drill runs
    copies.produced("primary", "orders", produce(primary, "orders", N, prefix="p1"))
    # consumers of two groups read part of `orders` on the primary
    _parallel([partial(read_group, primary, "app-billing", ["orders"], limit=900),
               partial(read_group, primary, "app-audit", ["orders"], limit=1700)])

    with stack_project("active-passive", tmp_path / "stack", topology(sites["primary"], sites["standby"])) as project:
        up = project.run("up", "--yes", "--skip-preview", timeout=900)
        out = project.outputs()
        assert out["failover"]["active"] == "primary" and out["failover"].get("report") is None, out["failover"]
        assert {s["state"] for s in out["flows"][FORWARD].values()} == {"RUNNING"}
        assert {s["state"] for s in out["flows"][REVERSE].values()} == {"STOPPED"}, out["flows"]
        url = out["connect"]["standby"]
        copies.read_topic("standby", standby, PRIMARY_ORDERS, N)  # replicated before anything switches
        drill_while_writing(project, sites, copies, out)

        # 1. each gate failure: `up` fails saying why, and the stack is unchanged
        project.run("config", "set", "--path", "mirrorstack:topology.failover.active", "standby")
        preview = project.run("preview", "--diff")
        assert re.search(r'~ active\s*: "primary" => "standby"', preview.stdout), preview.stdout[-5000:]
        # (the CLI writes info diagnostics to stderr)
        assert f"failover: failover primary -> standby, planned: the gate waits up to {FAILING_GATE_SECONDS}s" \
            in preview.stderr, \
            preview.stderr[-3000:]

        still_reading = Consumer({"bootstrap.servers": primary, "group.id": "app-billing",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        still_reading.subscribe(["orders"])
        deadline = time.monotonic() + 30
        while not still_reading.assignment() and time.monotonic() < deadline:
            still_reading.poll(0.5)  # joined: a member of app-billing on primary
        try:
            text = failed_up(project)
            assert "active consumers on primary: app-billing (1 member(s))" in text, text[-3000:]
        finally:
            still_reading.close()

        connector(url, f"{FORWARD}.{SOURCE}", "pause")
        copies.produced("primary", "orders", produce(primary, "orders", LAGGED, prefix="p2"))
        text = failed_up(project)
        assert re.search(r"in flight: [1-9][0-9]* record\(s\) on .* of primary not yet replicated to standby", text), \
            text[-3000:]
        connector(url, f"{FORWARD}.{SOURCE}", "resume")

        # A commit no checkpoint has seen, which a checkpoint would translate further than the last one:
        # past an offset sync the source task writes for its first record (stopped and resumed: a new task).
        connector(url, f"{FORWARD}.{CHECKPOINT}", "pause")
        connector(url, f"{FORWARD}.{SOURCE}", "stop")
        connector(url, f"{FORWARD}.{SOURCE}", "resume")
        copies.produced("primary", "orders", produce(primary, "orders", SYNCED, prefix="p2b"))
        copies.read_topic("standby", standby, PRIMARY_ORDERS, N + LAGGED + SYNCED)
        read_group(primary, "app-audit", ["orders"])  # to the end
        text = failed_up(project)
        assert "stale checkpoints: group app-audit" in text, text[-3000:]
        connector(url, f"{FORWARD}.{CHECKPOINT}", "resume")

        unchanged = project.outputs()
        for name in (f"{FORWARD}.{SOURCE}", f"{FORWARD}.{CHECKPOINT}"):  # the flow still runs
            assert connector(unchanged["connect"]["standby"], name) == "RUNNING", name
        assert unchanged["failover"]["active"] == "primary" and unchanged["failover"].get("report") is None
        assert unchanged["flows"] == out["flows"]
        for group in GROUPS:  # nothing written on the standby
            assert committed(standby, group, [PRIMARY_ORDERS]) == {}, group

        # 2. planned failover: the gate passes, both groups resume on the standby
        before = {g: committed(primary, g, ["orders"]) for g in GROUPS}
        project.run("config", "set", "--path", "mirrorstack:topology.failover.gate.wait_seconds", "90")
        up = project.run("up", "--yes", "--skip-preview", timeout=900)
        log = up.stdout + up.stderr
        out = project.outputs()
        report = out["failover"]["report"]
        assert out["failover"]["active"] == "standby" and report["kind"] == "failover", out["failover"]
        assert (report["from"], report["to"], report["mode"]) == ("primary", "standby", "planned")
        assert report["gate"]["in_flight"] == 0 and set(report["groups"]) == set(GROUPS), report
        print(rules.render_report(report))  # the figures, with -s
        assert "planned switch primary -> standby" in log and "app-billing" in log  # the report in the up log
        assert {s["state"] for s in out["flows"][FORWARD].values()} == {"STOPPED"}
        assert {s["state"] for s in out["flows"][REVERSE].values()} == {"RUNNING"}
        reads = dict(zip(GROUPS, _parallel(partial(read_group, standby, g, [PRIMARY_ORDERS]) for g in GROUPS)))
        for group in GROUPS:
            read = reads[group]
            side = {v: (t, p, o) for v, (t, p, o) in copies.on("primary").items()}
            reread, lost = moved(read, before[group], side)
            assert (reread, lost) == (0, 0) and report["groups"][group]["lost"] == 0, (group, report["groups"][group])
            assert_moved_exactly(report["groups"][group], read, before[group], side, copies.on("standby"))
        # MM2's translation alone would have re-read records on this data
        assert sum(report["groups"][g]["translated_reread"] for g in GROUPS) > 0, report

        # 3. standby active: its records reach the primary once; failback moves the groups back
        copies.produced("standby", "orders", produce(standby, "orders", M, prefix="s1"))
        _parallel([partial(read_group, standby, "app-billing", ["orders"], limit=30),
                   partial(read_group, standby, "app-audit", ["orders"], limit=60)])
        before = {g: committed(standby, g, ["orders", PRIMARY_ORDERS]) for g in GROUPS}
        for key, value in (("active", "primary"), ("validation.flows[0]", REVERSE),
                           ("validation.report_only", "true"), ("validation.wait_seconds", "60")):
            project.run("config", "set", "--path", f"mirrorstack:topology.failover.{key}" if key == "active"
                        else f"mirrorstack:topology.{key}", value)
        up = project.run("up", "--yes", "--skip-preview", timeout=900)
        # the forward flow runs again and standby_orders is on the primary: its topic refresh rounds from here see it
        marks = refresh_marks(project.local_dir)
        out = project.outputs()
        report = out["failover"]["report"]
        assert (out["failover"]["active"], report["kind"], report["from"], report["to"]) == (
            "primary", "failback", "standby", "primary"), report
        counts = out["validation"]["flows"][REVERSE]
        assert (counts["source_records"], counts["matched"], counts["missing"], counts["duplicates"]) == (
            M, M, 0, 0), counts
        assert {s["state"] for s in out["flows"][FORWARD].values()} == {"RUNNING"}
        assert {s["state"] for s in out["flows"][REVERSE].values()} == {"STOPPED"}
        copies.read_topic("primary", primary, STANDBY_ORDERS, M)
        side = {**{v: w for v, w in copies.on("standby").items()}}
        reads = dict(zip(GROUPS, _parallel(partial(read_group, primary, g, ["orders", STANDBY_ORDERS])
                                           for g in GROUPS)))
        for group in GROUPS:
            read = reads[group]
            reread, lost = moved(read, before[group], side)
            assert (reread, lost) == (0, 0) and report["groups"][group]["lost"] == 0, (group, report["groups"][group])
            assert_moved_exactly(report["groups"][group], read, before[group], side, copies.on("primary"))
        wait_for_refresh_rounds(marks, rounds=1)  # a discovery round of the resumed forward flow: nothing may loop
        names = topic_names(primary) | topic_names(standby)
        assert not {f"standby{SEP}{PRIMARY_ORDERS}", f"primary{SEP}{STANDBY_ORDERS}"} & names, names
        assert len(consume(primary, STANDBY_ORDERS, M + 1, timeout=10)) == M

        # 4. the primary is lost: unplanned failover from the last checkpoints
        copies.produced("primary", "orders", produce(primary, "orders", K, prefix="p3"))
        read_group(primary, "app-billing", ["orders"], limit=K // 2)
        copies.read_topic("standby", standby, PRIMARY_ORDERS, N + LAGGED + SYNCED + K)
        wait_for_fresh_checkpoints(primary, standby, GROUPS)  # checkpoints caught up with the last commits
        before = {g: committed(primary, g, ["orders"]) for g in GROUPS}
        connector(url, f"{FORWARD}.{SOURCE}", "pause")  # what the primary takes now never reaches the standby
        never_copied = produce(primary, "orders", 6, prefix="p4")
        for handle in sites["primary"].handles:
            os.kill(handle.pid, signal.SIGKILL)
        project.run("config", "set", "--path", "mirrorstack:topology.failover.active", "standby")
        project.run("config", "set", "--path", "mirrorstack:topology.failover.unplanned", "true")
        up = project.run("up", "--yes", "--skip-preview", timeout=900)
        out = project.outputs()
        report = out["failover"]["report"]
        # (None values come back from Pulumi's state as missing keys)
        assert (out["failover"]["active"], report["mode"], report.get("gate")) == ("standby", "unplanned", None), report
        assert any("cannot be counted until primary returns" in n for n in report["notes"]), report["notes"]
        assert any("primary did not answer" in n for n in report["notes"]), report["notes"]
        replicated = {v: w for v, w in copies.on("primary").items() if w[0] == "orders" and v in copies.on("standby")}
        reads = dict(zip(GROUPS, _parallel(partial(read_group, standby, g, [PRIMARY_ORDERS]) for g in GROUPS)))
        for group in GROUPS:
            entry = report["groups"][group]
            assert entry.get("lost") is None and entry.get("reread") is None, entry
            read = reads[group]
            reread, lost = moved(read, before[group], replicated)
            assert lost == 0, (group, entry)
            assert len(read) == entry["reread_at_most"], (group, len(read), entry)

        # 5. the primary is back: removing `unplanned` counts, by record identity, what each group re-read
        # and lost (the records the primary took after the last copy)
        sites["primary"].start_again()
        project.run("config", "set", "--path", "mirrorstack:topology.failover.unplanned", "false")
        up = project.run("up", "--yes", "--skip-preview", timeout=900)
        assert "primary answers again" in up.stdout + up.stderr, (up.stdout + up.stderr)[-3000:]
        out = project.outputs()
        returned = out["failover"]["report"]["returned"]
        assert {s["state"] for s in out["flows"][REVERSE].values()} == {"RUNNING"}, out["flows"]
        for group in GROUPS:
            entry = returned["groups"][group]
            reread, _ = moved(reads[group], before[group], replicated)
            partitions = {int(row["partition"]) for row in entry["partitions"]}
            assert (entry["reread"], entry["lost"]) == (
                reread, sum(1 for r in never_copied if r.partition in partitions)), (group, entry)
        assert sum(returned["groups"][g]["lost"] for g in GROUPS) > 0, returned
        project.run("destroy", "--yes", "--skip-preview", timeout=600)
