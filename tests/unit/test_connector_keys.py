"""The one table between connector config keys and flow fields
(components/mm2/connector_keys.py) is the one the generator writes, the model
refuses overrides of, and the rename check reads back."""
from __future__ import annotations

import dataclasses

import pytest

from mirrorstack.mirror.connectors import mirror_connector_configs
from mirrorstack.mm2.connector_keys import FLOW_KEYS, KEYS, flow_fields
from mirrorstack.mm2.flows import FlowDescription
from mirrorstack.model.rules import MANAGED_KEYS
from mirrorstack.model.spec import load_topology
from mirrorstack.plan import rename_check

FLOWS = [
    {},
    {"replication_policy": "identity", "separator": "_", "topics": ["orders", "clicks.*"], "topics_exclude": ["tmp"],
     "groups": ["billing-.*"], "groups_exclude": ["batch"], "tasks_max": 4, "refresh_seconds": 30,
     "sync_topic_configs": True, "config_sync_seconds": 20, "sync_topic_acls": True, "sync_group_offsets": True},
]


def _configs(fields: dict) -> tuple:
    topology = load_topology({"clusters": {"us": {"brokers": 1}, "central": {"brokers": 1}},
                              "flows": [{"source": "us", "target": "central", **fields}]})
    flow = topology.flows[0].description()
    configs = mirror_connector_configs(flow, replication_factor=1, source_bootstrap="us:9092",
                                       target_bootstrap="central:9092")
    return flow, {kind: configs[flow.connector_name(kind)] for kind in ("source", "checkpoint", "heartbeat")}


@pytest.mark.parametrize("fields", FLOWS)
def test_the_generator_writes_each_key_on_the_connectors_the_table_names(fields):
    _, configs = _configs(fields)
    for kind, config in configs.items():
        wanted = {k.key for k in FLOW_KEYS if kind in k.kinds}
        if "config_sync_seconds" not in fields:
            wanted.discard("sync.topic.configs.interval.seconds")  # MM2's own interval unless set
        if kind == "heartbeat":
            wanted.add("tasks.max")  # one heartbeat task per flow, whatever its tasks_max
        assert wanted == set(config) & set(KEYS), kind


@pytest.mark.parametrize("fields", FLOWS)
def test_each_field_reads_back_from_the_config_it_was_written_to(fields):
    flow, configs = _configs(fields)
    for kind, config in configs.items():
        for key in (k for k in FLOW_KEYS if k.key in config and kind in k.kinds):
            value = flow_fields(config, [key.field])[key.field]
            if key.always:  # what no flow replicates, then the flow's own
                assert value == [*key.always, *getattr(flow, key.field)]
            else:
                written = getattr(flow, key.field)
                assert value == (list(written) if isinstance(written, tuple) else written), (kind, key.key)
    # the rename check reads its flow through the table: every field the table and the description share
    read = rename_check._flow(configs["source"])
    table = flow_fields(configs["source"], [f.name for f in dataclasses.fields(FlowDescription)])
    assert {k: getattr(read, k) for k in table} == {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}
    assert {"source", "target", "topics", "topics_exclude", "replication_policy", "separator"} <= set(table)


def test_the_model_refuses_an_override_of_every_key_but_the_overridable_ones():
    assert {k.key for k in FLOW_KEYS if not k.overridable} <= set(MANAGED_KEYS)
    assert not {k.key for k in FLOW_KEYS if k.overridable} & set(MANAGED_KEYS)
