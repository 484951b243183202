"""Records purged at the source before MM2 copied them: the OffsetSync byte
format and the gap arithmetic over offset syncs (components/mm2/records.py, spark/purged.py).
No Spark, no Kafka: the real flow is in tests/integration/test_validation_job.py."""
import pytest

from mirrorstack.validation.job_config import validation_job_config, validation_summary
from mirrorstack.model.spec import load_topology
from mirrorstack.spark.config import BadInput, DEFAULT_TOLERANCE, parse_config
from mirrorstack.mm2.records import decode_offset_sync, encode_offset_sync
from mirrorstack.spark.purged import purged_in_gaps, purged_pending
from mirrorstack.spark.report import group_failures


def test_offset_sync_bytes_round_trip():
    key, value = encode_offset_sync("orders", 3, 1200, 77)
    assert key == b"\x00\x06orders\x00\x00\x00\x03"
    assert value == (1200).to_bytes(8, "big") + (77).to_bytes(8, "big")
    assert decode_offset_sync(key, value) == ("orders", 3, 1200, 77)


def test_no_gap_when_every_upstream_offset_was_copied():
    # syncs every offset.lag.max records and one per task start: spans equal on both sides
    assert purged_in_gaps([(0, 0), (100, 100), (250, 250)], log_start=1000) == 0


def test_a_purge_while_paused_is_the_jump_the_resumed_consumer_makes():
    # copied upstream 0..39 to downstream 0..39 (last sync at 30), then upstream 40..64 were
    # deleted before MM2 read them; the consumer reset to the log start 65 -> sync (65, 40)
    syncs = [(0, 0), (30, 30), (65, 40)]
    assert purged_in_gaps(syncs, log_start=65) == 25
    # coalesced syncs (the writer kept only the latest) give the same count
    assert purged_in_gaps([(0, 0), (65, 40)], log_start=65) == 25
    # and retention moving further later does not change it
    assert purged_in_gaps(syncs + [(90, 65)], log_start=80) == 25


def test_gaps_above_the_log_start_are_records_still_there():
    # a transactional source: each commit marker is an upstream offset MM2 never copies
    syncs = [(0, 0), (5, 4), (10, 8)]
    assert purged_in_gaps(syncs, log_start=0) == 0
    # once retention deletes past them they are no longer distinguishable (docs/validation.md says so)
    assert purged_in_gaps(syncs, log_start=10) == 2
    # a gap straddling the log start counts only its part below it
    # upstream 10..49 never copied: 10..29 are gone, 30..49 still there
    assert purged_in_gaps([(0, 0), (50, 10)], log_start=30) == 20


def test_recopied_records_never_make_a_negative_count():
    # a task restarted from an older committed offset copies 20 records again
    syncs = [(0, 0), (100, 100), (80, 121), (150, 191)]
    assert purged_in_gaps(syncs, log_start=200) == 0


def test_gaps_outside_the_window_are_left_out():
    syncs = [(0, 0), (65, 40), (100, 50)]
    assert purged_in_gaps(syncs, 100, counted=[True, False, True]) == 25
    assert purged_in_gaps(syncs, 100, counted=[True, True, True]) == 25 + 25


@pytest.mark.parametrize("last_sync, target_end, log_start, pending", [
    ((30, 30), 40, 65, 25),   # paused after copying 0..39; 40..64 deleted: gone before MM2 got there
    ((30, 30), 40, 40, 0),    # nothing deleted past the next offset to copy
    ((30, 30), 40, 10, 0),    # retention behind the copy
    ((65, 40), 41, 65, 0),    # resumed: the reset sync is the latest one
    (None, 0, 65, 0),         # no sync yet: no evidence
])
def test_pending_purge_of_a_paused_flow(last_sync, target_end, log_start, pending):
    assert purged_pending(last_sync, target_end, log_start) == pending


def test_purged_fails_the_group_unless_tolerated():
    group = {"topic": "us.orders", "target_bootstrap": "c:9092", "partitions_ok": True, "target_partitions": 1,
             "sources": [], "missing": 0, "duplicates": 0, "extras": 0, "out_of_order": 0, "in_flight": 0,
             "purged": 25, "failover": []}
    assert group_failures(group, dict(DEFAULT_TOLERANCE)) == ["us.orders on c:9092: purged 25 > tolerance 0"]
    assert group_failures(group, {**DEFAULT_TOLERANCE, "purged": None}) == []
    assert parse_config({"flows": [{"source_bootstrap": "a:1", "target_bootstrap": "b:1", "source_alias": "us",
                                        "topics": ["orders"], "offset_syncs_topic": "mm2-offset-syncs.us.internal"}],
                             "tolerance": {"purged": "unlimited"}}).tolerance["purged"] is None
    with pytest.raises(BadInput) as info:
        parse_config({"flows": [{"source_bootstrap": "a:1", "target_bootstrap": "b:1", "source_alias": "us",
                                     "topics": ["orders"], "offset_syncs_topic": "no/such"}]})
    assert info.value.problems == ["flows[0].offset_syncs_topic: 'no/such' is not a Kafka topic name"]


def test_the_job_config_names_the_flows_offset_syncs_topic_and_the_stack_output_sums_purged():
    topology = load_topology({"clusters": {"us": {}, "central": {}},
                              "flows": [{"source": "us", "target": "central", "topics": ["orders"]},
                                        {"source": "central", "target": "us", "topics": ["x"], "separator": "_"}],
                              "validation": {"tolerance": {"purged": 5}}})
    config = validation_job_config(topology, {"us": "u:9092", "central": "c:9092"})
    assert [f.offset_syncs_topic for f in parse_config(config).flows] == ["mm2-offset-syncs.us.internal",
                                                                         "mm2-offset-syncs_central_internal"]
    assert config["tolerance"]["purged"] == 5
    assert topology.flows[0].description().offset_syncs_topic() == "mm2-offset-syncs.us.internal"
    report = {"status": "failed", "passed": False, "failures": ["x"], "duration_seconds": 1.0, "groups": [],
              "flows": [{"name": "us->central", "topics": [
                  {"topic": "orders", "source_records": 10, "matched": 10, "missing": 0, "in_flight": 0,
                   "duplicates": 0, "out_of_order": 0, "purged": 25}]}]}
    assert validation_summary(report)["flows"]["us->central"]["purged"] == 25
