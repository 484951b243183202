"""Every topology stack through the real engine on the local platform: records
produced at the sources arrive exactly where the policy says, then destroy.
(active-passive is deployed by test_failover.py and test_connect_faults.py,
which check its copy and its checkpoints.)"""
import json
import time
from pathlib import Path

import pytest

from tests.support.kafka_clients import (committed_offsets, consume_group, consume_group_to_end, create_topic,
                                         end_offsets, produce, topic_names, wait_for_count)
from tests.support.mm2_rounds import refresh_marks, wait_for_refresh_rounds
from tests.support.services import _parallel
from tests.support.stacks import deployed_stack

pytestmark = pytest.mark.integration


def _values(records):
    return sorted(r.value for r in records)


def _wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout:.0f}s: {what}"
        time.sleep(0.5)


def test_active_active_exchanges_topics_without_loops(tmp_path):
    with deployed_stack("active-active", tmp_path) as (project, out):
        east, west = out["clusters"]["east"], out["clusters"]["west"]
        for cluster in (east, west):
            create_topic(cluster, "orders", 2, 1)
        sent_east, sent_west = [], []
        for round_ in range(5):  # traffic on both sides for a while, while MM2 runs:
            sent_east += produce(east, "orders", 100, f"east{round_}")
            sent_west += produce(west, "orders", 140, f"west{round_}")
            # the next round once MM2 has copied this one (the first waits for MM2 to find the topics)
            _wait_until(lambda: end_offsets(west, "east.orders") >= len(sent_east)
                        and end_offsets(east, "west.orders") >= len(sent_west), 180, f"round {round_} copied")
        # Both copies exist and hold every record: from here each flow's topic refresh
        # rounds see them (a loop would start in the first one).
        marks = refresh_marks(project.local_dir)
        assert len(marks) == 2, marks  # a Connect worker for each flow (east->west on west, west->east on east)
        copied_east, copied_west = _parallel([lambda: wait_for_count(west, "east.orders", 500),
                                              lambda: wait_for_count(east, "west.orders", 700)])
        assert _values(copied_east) == _values(sent_east)
        assert _values(copied_west) == _values(sent_west)
        wait_for_refresh_rounds(marks, rounds=2)  # a few more MM2 refresh rounds: nothing may loop back
        counts = _parallel([lambda: len(wait_for_count(east, "orders", 500, timeout=30)),
                            lambda: len(wait_for_count(west, "orders", 700, timeout=30)),
                            lambda: len(wait_for_count(west, "east.orders", 500, timeout=30)),
                            lambda: len(wait_for_count(east, "west.orders", 700, timeout=30))])
        assert counts[0] == 500
        assert counts[1] == 700
        assert counts[2] == 500
        assert counts[3] == 700
        assert not {"east.west.orders", "west.east.orders"} & (topic_names(east) | topic_names(west))


def test_fan_out_copies_to_every_target(tmp_path):
    with deployed_stack("fan-out", tmp_path) as (_, out):
        hq = out["clusters"]["hq"]
        create_topic(hq, "orders", 3, 1)
        sent = produce(hq, "orders", 1000)
        targets = ("eu", "us", "apac")
        copies = _parallel([lambda t=t: wait_for_count(out["clusters"][t], "hq.orders", 1000) for t in targets])
        for target, copied in zip(targets, copies):
            assert _values(copied) == _values(sent), target


def test_forwarding_carries_records_to_the_end_of_the_chain(tmp_path):
    with deployed_stack("forwarding", tmp_path) as (_, out):
        edge = out["clusters"]["edge"]
        create_topic(edge, "orders", 2, 1)
        sent = produce(edge, "orders", 1000)
        at_region, at_core = _parallel([
            lambda: wait_for_count(out["clusters"]["region"], "edge.orders", 1000),
            lambda: wait_for_count(out["clusters"]["core"], "region.edge.orders", 1000, timeout=240)])
        assert _values(at_region) == _values(sent)
        assert _values(at_core) == _values(sent)


def test_migration_resumes_a_consumer_group_on_the_new_cluster_without_skipping(tmp_path):
    with deployed_stack("migration", tmp_path) as (project, out):
        old, new = out["clusters"]["old"], out["clusters"]["new"]
        create_topic(old, "app.orders", 3, 1)
        sent = produce(old, "app.orders", 1000)
        # the group reads on old while MM2 copies
        copied, read_on_old = _parallel([lambda: wait_for_count(new, "app.orders", 1000),
                                         lambda: consume_group(old, "app.orders", "app-billing", 400)])
        assert len(copied) == 1000  # identity: same name
        assert len(read_on_old) == 400
        committed_old = committed_offsets(old, "app-billing", "app.orders", 3)

        # MM2 translates and writes the group's offsets on the new cluster, for
        # every partition the group has an offset for on the old one
        read_partitions = {p for p, offset in committed_old.items() if offset >= 0}
        assert read_partitions
        deadline, synced = time.monotonic() + 180, {}
        while time.monotonic() < deadline:
            synced = committed_offsets(new, "app-billing", "app.orders", 3)
            if all(synced[p] >= 0 for p in read_partitions):
                break
            time.sleep(0.5)
        assert all(synced[p] >= 0 for p in read_partitions), f"offsets not synced to new: {synced}"
        for partition in read_partitions:  # conservative translation: never ahead of the source
            assert synced[partition] <= committed_old[partition]

        # the validation resource, re-run before clients switch: every record copied,
        # and app-billing failing over at the translated offsets loses nothing
        project.run("up", "--yes", "--skip-preview", "--config", "mirrorstack:validationRunId=cutover", timeout=900)
        validation = project.outputs()["validation"]
        assert validation["passed"] is True, validation
        counts = validation["flows"]["old->new"]
        assert (counts["source_records"], counts["matched"], counts["missing"], counts["duplicates"]) == (1000, 1000, 0, 0)
        billing = counts["failover"]["app-billing"]
        assert billing["lost"] == 0
        # identity copy of fresh topics: offsets align, so re-reads are the distance
        # between where the group stood on old and its latest checkpoint on new
        report = json.loads(Path(project.local_dir, "validation-job", "report.json").read_text())
        (entry,) = [f for g in report["groups"] for f in g["failover"] if f["consumer_group"] == "app-billing"]
        downstream = {c["partition"]: c["downstream_offset"] for c in entry["checkpoints"]}
        assert set(downstream) == read_partitions
        assert all(downstream[p] <= committed_old[p] for p in read_partitions)
        assert billing["reread"] == sum(committed_old[p] - downstream[p] for p in read_partitions) <= 400

        # the cutover (failover.active: new): the gate passes, the flow stops, the
        # group's translated offsets are written on new, and there is no way back
        project.run("config", "set", "--path", "mirrorstack:topology.failover.active", "new")
        project.run("up", "--yes", "--skip-preview", timeout=900)
        out = project.outputs()
        cutover = out["failover"]["report"]
        assert out["failover"]["active"] == "new", out["failover"]
        assert (cutover["kind"], cutover["mode"], cutover["from"], cutover["to"]) == ("cutover", "planned", "old", "new")
        assert cutover["groups"]["app-billing"]["lost"] == 0, cutover["groups"]
        assert {s["state"] for s in out["flows"]["old->new"].values()} == {"STOPPED"}
        project.run("config", "set", "--path", "mirrorstack:topology.failover.active", "old")
        back = project.run("up", "--yes", "--skip-preview", check=False, timeout=600)
        assert back.returncode != 0 and "the cutover to new is final" in back.stdout + back.stderr, back.stdout[-3000:]
        assert project.outputs()["failover"]["active"] == "new"

        # the group resumes on the new cluster with the same consumer settings
        # (earliest where it never committed): together nothing is skipped, and
        # it re-reads exactly what the cutover's report says
        read_on_new = consume_group_to_end(new, "app.orders", "app-billing", timeout=30)  # nothing writes there now
        assert {r.value for r in read_on_old} | {r.value for r in read_on_new} == {r.value for r in sent}
        assert len(read_on_new) == 600 + cutover["groups"]["app-billing"]["reread"], cutover["groups"]
