"""The flow description carries everything the connector generator writes: the
model fills every field, the defaults are the model's, and the fields cross as
JSON (to_dict/from_dict) and come back the same, while a dict written before
they existed still reads and a flow that sets none of them keeps its old dict."""
from __future__ import annotations

import dataclasses
import json

import pytest

from mirrorstack.mm2.flow_settings import FlowThroughput, NamesByKind, OverridesByKind
from mirrorstack.mm2.flows import FlowDescription
from mirrorstack.model.spec import Flow, load_topology

EVERY_SETTING = {
    "source": "us", "target": "central", "topics": ["orders.*"], "exactly_once": True, "heartbeats": False,
    "sync_group_offsets": True, "sync_topic_acls": True, "config_sync_seconds": 30, "tasks_max": 7,
    "refresh_seconds": 11,
    "throughput": {"batch_bytes": 65536, "linger_ms": 20, "in_flight": 3, "compression": "lz4",
                   "max_record_bytes": 8 * 2**20, "poll_records": 2000},
    "overrides": {"source": {"producer.override.linger.ms": "50", "offset.lag.max": "10"},
                  "checkpoint": {"emit.checkpoints.interval.seconds": "5"}},
    "connector_names": {"source": "mm2-msc"},
    "take_over": {"source": "old-msc", "checkpoint": "old-cpc"}}
# The dict an older mirrorstack wrote (exported plans, failover props): none of the generator's fields.
OLD_SHAPE = {"name": "us->central", "source": "us", "target": "central", "topics": [".*"], "topics_exclude": [],
             "groups": [".*"], "groups_exclude": [], "replication_policy": "default", "separator": ".",
             "sync_topic_configs": True, "checkpoints": True, "compression": "zstd"}


def _flow(**fields) -> Flow:
    return load_topology({"clusters": {"us": {}, "central": {}},
                          "flows": [{"source": "us", "target": "central", **fields}]}).flows[0]


def test_the_model_fills_every_field_the_generator_writes():
    described = _flow(**{k: v for k, v in EVERY_SETTING.items() if k not in ("source", "target")}).description()
    assert (described.exactly_once, described.heartbeats, described.sync_group_offsets, described.sync_topic_acls,
            described.config_sync_seconds, described.tasks_max, described.refresh_seconds) == (
        True, False, True, True, 30, 7, 11)
    assert described.compression == "lz4"
    assert described.throughput == FlowThroughput(batch_bytes=65536, linger_ms=20, in_flight=3,
                                                  max_record_bytes=8 * 2**20, poll_records=2000)
    assert described.overrides.for_kind("source") == {"producer.override.linger.ms": "50", "offset.lag.max": "10"}
    assert list(described.overrides.for_kind("source")) == ["producer.override.linger.ms", "offset.lag.max"]
    assert described.overrides.by_kind() == EVERY_SETTING["overrides"]
    assert described.connector_names == NamesByKind(source="mm2-msc")
    assert described.take_over.by_kind() == {"source": "old-msc", "checkpoint": "old-cpc"}
    assert [described.connector_name(k) for k in ("source", "checkpoint")] == [
        "mm2-msc", "us->central.MirrorCheckpointConnector"]
    hash(described)  # frozen all the way down: a set or a dict key holds it


def test_the_descriptions_defaults_are_the_models():
    assert Flow(source="us", target="central").description() == FlowDescription(
        "us->central", "us", "central", compression="zstd")
    assert _flow(connector_names={}, take_over={}).description() == Flow(source="us", target="central").description()


def test_every_field_crosses_as_json_and_comes_back_the_same():
    described = _flow(**{k: v for k, v in EVERY_SETTING.items() if k not in ("source", "target")}).description()
    data = json.loads(json.dumps(described.to_dict()))
    assert FlowDescription.from_dict(data) == described
    assert data["throughput"] == {"batch_bytes": 65536, "linger_ms": 20, "in_flight": 3,
                                  "max_record_bytes": 8 * 2**20, "poll_records": 2000}
    assert data["overrides"] == EVERY_SETTING["overrides"] and data["take_over"] == EVERY_SETTING["take_over"]
    # Pulumi's dynamic props give whole numbers back as floats
    floats = {**data, "tasks_max": 7.0, "throughput": {**data["throughput"], "poll_records": 2000.0}}
    assert FlowDescription.from_dict(floats) == described
    # a nested field may list only what differs from its default
    partial = FlowDescription.from_dict({**OLD_SHAPE, "throughput": {"linger_ms": 0}})
    assert partial.throughput == dataclasses.replace(FlowThroughput(), linger_ms=0)


def test_a_dict_of_the_old_shape_reads_with_the_models_defaults_and_a_plain_flow_keeps_it():
    old = FlowDescription.from_dict(OLD_SHAPE)
    assert old == Flow(source="us", target="central").description()
    assert (old.tasks_max, old.refresh_seconds, old.heartbeats, old.throughput, old.overrides, old.take_over) == (
        2, 60, True, FlowThroughput(), OverridesByKind(), NamesByKind())
    assert old.to_dict() == OLD_SHAPE  # unchanged: stacks exported before see no change


@pytest.mark.parametrize("field, value, message", [
    ("tasks_max", "4", "tasks_max: must be a whole number"),
    ("tasks_max", 2.5, "tasks_max: must be a whole number"),
    ("heartbeats", "no", "heartbeats: must be true or false"),
    ("throughput", {"batch_bytes": "big"}, "throughput.batch_bytes: must be a whole number"),
    ("throughput", {"compression": "lz4"}, r"throughput: unknown field\(s\) compression"),
    ("overrides", {"source": {"linger.ms": 5}}, "overrides.source: must map config keys to strings"),
    ("overrides", {"sink": {}}, r"overrides: unknown field\(s\) sink"),
    ("take_over", {"source": ""}, "take_over.source: must be a connector name"),
    ("connector_names", ["mm2-msc"], "connector_names: must be an object"),
])
def test_a_value_of_the_wrong_kind_is_refused_naming_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        FlowDescription.from_dict({**OLD_SHAPE, field: value})


def test_what_the_plan_calls_a_change_is_only_what_the_flow_copies_and_how_it_names_it():
    old = FlowDescription.from_dict(OLD_SHAPE)
    tuned = _flow(tasks_max=7, throughput={"linger_ms": 0}, overrides={"source": {"a": "b"}}).description()
    assert tuned.changes(old) == []
    assert _flow(topics=["orders"], checkpoints=False).description().changes(old) == ["topics", "checkpoints"]


def test_the_validation_jobs_input_leaves_the_connectors_own_settings_out():
    """A tasks_max (or any connector-only) change re-ran the local validation job: its input held
    the setting (found by the aggregation and existing-connect stacks' one-flow-update checks)."""
    from mirrorstack.mm2.flows import CONNECTOR_SETTINGS, FlowDescription
    from mirrorstack.model.spec import load_topology
    from mirrorstack.validation.job_config import validation_job_config
    tuned = load_topology({"clusters": {"a": {"brokers": 1}, "b": {"brokers": 1}}, "validation": {},
                           "flows": [{"source": "a", "target": "b", "tasks_max": 5, "heartbeats": False}]})
    described = tuned.flows[0].description()
    assert {"tasks_max", "heartbeats"} <= set(described.to_dict())
    (entry,) = validation_job_config(tuned, {"a": "a:9092", "b": "b:9092"})["flows"]
    assert not set(CONNECTOR_SETTINGS) & set(entry["flow"]), entry["flow"]
    assert FlowDescription.from_dict(entry["flow"]).selection() == described.selection()
