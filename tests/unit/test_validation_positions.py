"""Given positions in the validation job: a failover drill's group copies, handed to the job as
`positions` of the flow it rehearsed, checked on input (each field named), counted into failures
and the stack output; the job runs after the drill (its counting on real records is in
tests/integration/test_validation_job.py, the drill's handing over in test_failover.py)."""
from __future__ import annotations

import pytest

from mirrorstack import topology as topology_module
from mirrorstack.model.spec import load_topology
from mirrorstack.spark.config import BadInput, parse_config
from mirrorstack.spark.positions import Position, unproved, unproved_positions
from mirrorstack.spark.report import group_failures, summary_text
from mirrorstack.validation.job_config import drill_positions, validation_job_config, validation_summary
from tests.support.failover_pair import build, pair

FLOW = {"source_bootstrap": "a:1", "target_bootstrap": "b:1", "source_alias": "us", "topics": ["orders"]}
ROW = {"topic": "orders", "partition": 0, "upstream_offset": 5, "downstream_offset": 7}
# a drill's report as Pulumi's state gives it back: nulls dropped
REPORT = {"mode": "drill", "run": "d1", "from": "primary", "to": "standby", "passed": True, "groups": {
    "app": {"partitions": [{}], "proof": {"copy": "mirrorstack-drill.d1.app", "reread": 0, "lost": 0, "partitions": [
        {"from_topic": "orders", "to_topic": "primary.orders", "partition": 1, "committed": 40, "copy_at": 43},
        {"from_topic": "orders", "to_topic": "primary.orders", "partition": 2, "reread": 0}]}},
    "idle": {"partitions": []}}}


def test_positions_parse_into_one_per_partition():
    flow = parse_config({"flows": [{**FLOW, "positions": [
        {"name": "c", "consumer_group": "g", "label": "drill d1", "partitions": [ROW, {**ROW, "partition": 1}]}]}]})
    assert flow.flows[0].positions == (Position("c", "g", "orders", 0, 5, 7, "drill d1"),
                                       Position("c", "g", "orders", 1, 5, 7, "drill d1"))


@pytest.mark.parametrize("positions, problem", [
    ({"name": "c"}, "flows[0].positions: must be a list of positions"),
    ([{"consumer_group": "g", "partitions": [ROW]}], "flows[0].positions[0].name: required, a non-empty string"),
    ([{"name": "c", "consumer_group": "g"}], "flows[0].positions[0].partitions: required, a non-empty list"),
    ([{"name": "c", "consumer_group": "g", "partitions": [{**ROW, "upstream_offset": -1}]}],
     "flows[0].positions[0].partitions[0].upstream_offset: required, a non-negative integer"),
    ([{"name": "c", "consumer_group": "g", "partitions": [{**ROW, "topic": "a/b"}]}],
     "flows[0].positions[0].partitions[0].topic: required, the source topic's name"),
    ([{"name": "c", "consumer_group": "g", "at": 1, "partitions": [ROW]}],
     "flows[0].positions[0].at: unknown field"),
])
def test_bad_positions_name_the_field(positions, problem):
    with pytest.raises(BadInput) as info:
        parse_config({"flows": [{**FLOW, "positions": positions}]})
    assert any(p.startswith(problem) for p in info.value.problems), info.value.problems


def test_a_drills_copies_go_to_the_flow_it_rehearsed_as_positions():
    assert drill_positions(REPORT) == [{"name": "mirrorstack-drill.d1.app", "consumer_group": "app",
                                        "label": "drill d1", "partitions": [
                                            {"topic": "orders", "partition": 1, "upstream_offset": 40,
                                             "downstream_offset": 43}]}]
    topology = load_topology({**pair(), "validation": {}})
    servers = {"primary": "p:9092", "standby": "s:9092"}
    config = validation_job_config(topology, servers, drill=REPORT)
    assert [bool(f.get("positions")) for f in config["flows"]] == [True, False]  # primary->standby only
    assert [len(f.positions) for f in parse_config(config).flows] == [1, 0]
    assert "positions" not in str(validation_job_config(topology, servers, drill=None))
    back = validation_job_config(topology, servers, drill={**REPORT, "from": "standby", "to": "primary"})
    assert [bool(f.get("positions")) for f in back["flows"]] == [False, True]


def test_a_wrong_position_fails_its_group_and_the_stack_output_sums_it():
    entry = {"flow": "f", "name": "copy", "consumer_group": "g", "label": "drill d1", "topic": "orders",
             "remote_topic": "us.orders", "partitions": [{"partition": 0}, {"partition": 1}], "lost": 2, "reread": 0}
    group = {"topic": "us.orders", "target_bootstrap": "b:1", "partitions_ok": True, "failover": [],
             "positions": [entry, {**entry, "name": "fine", "lost": 0}]}
    assert group_failures(group, {}) == [
        "us.orders on b:1: copy (at the position of group g, drill d1) would re-read 0 and lose 2 record(s) of orders"]
    report = {"status": "failed", "passed": False, "failures": [], "duration_seconds": 1.0, "groups": [
        {**group, "sources": [{"flow": "f", "topic": "orders"}], "source_records": 9, "target_records": 9,
         "matched": 9, "missing": 0, "in_flight": 0, "duplicates": 0, "extras": 0, "out_of_order": 0,
         "timed_out": False, "samples": {}, "failures": []}],
        "flows": [{"name": "f", "topics": [{"topic": "orders", "source_records": 9, "matched": 9, "missing": 0,
                                            "in_flight": 0, "duplicates": 0, "out_of_order": 0}]}]}
    assert "position copy of g (f:orders): re-read 0, lost 2 over 2 partition(s)" in summary_text(report)
    assert validation_summary(report)["flows"]["f"]["positions"] == {
        "copy": {"consumer_group": "g", "label": "drill d1", "lost": 2, "reread": 0, "partitions": 2},
        "fine": {"consumer_group": "g", "label": "drill d1", "lost": 0, "reread": 0, "partitions": 2}}


def test_a_position_before_the_records_the_run_read_is_not_proved():
    at = [Position("c", "g", "orders", p, 10, 12) for p in range(3)]
    assert unproved(at, {0: (0, 50), 1: (11, 50)}) == [1, 2]  # 1: the window begins after it; 2: not read
    assert unproved(at, {0: (10, 50), 1: (0, 5), 2: (10, 10)}) == []
    entry = {"flow": "f", "name": "copy", "consumer_group": "g", "topic": "orders", "partitions": [],
             "lost": 0, "reread": 0, "unproved": [1]}
    group = {"topic": "us.orders", "target_bootstrap": "b:1", "partitions_ok": True, "failover": [],
             "positions": [entry]}
    [failure] = group_failures(group, {})
    assert failure.startswith("us.orders on b:1: copy (at the position of group g) was not proved on partition(s) "
                              "[1] of orders") and "validation.window" in failure, failure


def test_a_position_on_a_topic_the_run_did_not_check_is_said():
    flows = parse_config({"flows": [{**FLOW, "name": "f", "positions": [
        {"name": "c", "consumer_group": "g", "partitions": [ROW, {**ROW, "topic": "gone"}]}]}]}).flows
    proved = [{"positions": [{"flow": "f", "name": "c", "topic": "orders"}]}]
    assert unproved_positions(flows, proved) == [
        "flow f: position c (of group g) on gone was not proved: the run checked no record of gone (empty, or "
        "not a topic the flow replicates)"]


def test_the_validation_job_runs_after_the_drill_and_is_handed_its_report(tmp_path, monkeypatch):
    told = {}
    real = topology_module.SparkValidationJob

    def recording(name, args, opts):
        told.update(waits=[r._name for r in args.flows], drill=args.drill)
        return real(name, args, opts)
    monkeypatch.setattr(topology_module, "SparkValidationJob", recording)
    build(tmp_path, {**pair(drill={"run": "d1"}), "validation": {}}, monkeypatch)
    assert "dr-failover-drill" in told["waits"] and told["drill"] is not None
    build(tmp_path, {**pair(), "validation": {}}, monkeypatch)
    assert told["drill"] is None and not [w for w in told["waits"] if "drill" in w]
