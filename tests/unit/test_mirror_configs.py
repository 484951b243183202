import json

from mirrorstack.mirror.connectors import mirror_connector_configs
from mirrorstack.model.spec import load_topology
from tests.support.golden import assert_golden

BASE = {"clusters": {"us": {"brokers": 1}, "central": {"brokers": 3}}}


def _configs(flow: dict) -> dict:
    topology = load_topology({**BASE, "flows": [{"source": "us", "target": "central", **flow}]})
    flow = topology.flows[0]
    return mirror_connector_configs(flow.description(), replication_factor=topology.replication_factor(flow),
                                    source_bootstrap="us-broker-0:9092", target_bootstrap="central-broker-0:9092",
                                    target_client={"security.protocol": "PLAINTEXT"})


def test_default_flow_golden():
    assert_golden("mm2-default-flow.json", json.dumps(_configs({}), indent=2, sort_keys=False) + "\n")


def test_identity_flow_with_options_golden():
    configs = _configs({"replication_policy": "identity", "topics": ["orders", "clicks.*"],
                        "topics_exclude": ["clicks.internal"], "groups": ["billing-.*"], "tasks_max": 4,
                        "sync_group_offsets": True, "heartbeats": False,
                        "overrides": {"source": {"sync.topic.configs.interval.seconds": "10"}}})
    assert_golden("mm2-identity-flow.json", json.dumps(configs, indent=2) + "\n")


def test_the_config_sync_interval_is_a_typed_field_mm2s_600_s_unless_set():
    key, source = "sync.topic.configs.interval.seconds", "us->central.MirrorSourceConnector"
    assert key not in _configs({})[source]  # MM2's own default: 600 s
    assert _configs({"config_sync_seconds": 30})[source][key] == "30"
    assert key not in _configs({"config_sync_seconds": 30, "sync_topic_configs": False})[source]


def test_switches_decide_which_connectors_exist():
    assert list(_configs({})) == ["us->central.MirrorSourceConnector", "us->central.MirrorCheckpointConnector",
                                  "us->central.MirrorHeartbeatConnector"]
    assert list(_configs({"checkpoints": False, "heartbeats": False})) == ["us->central.MirrorSourceConnector"]


def test_every_value_is_a_string_and_replication_factors_fit_the_target():
    for config in _configs({}).values():
        assert all(isinstance(v, str) for v in config.values())
        for key, value in config.items():
            if key.endswith("replication.factor"):
                assert value == "3"  # central has 3 brokers


def test_overrides_are_applied_last():
    # e.g. a throughput setting (flow.throughput) the typed fields do not reach
    source = _configs({"overrides": {"source": {"producer.override.linger.ms": "50"}}})["us->central.MirrorSourceConnector"]
    assert source["producer.override.linger.ms"] == "50"


def test_the_task_producer_takes_a_record_as_large_as_its_buffer_and_compresses_like_a_source():
    source = _configs({})["us->central.MirrorSourceConnector"]
    # Kafka's 1 MiB max.request.size refuses a record a source took compressed; its 32 MiB buffer is the real bound
    assert source["producer.override.max.request.size"] == str(32 * 2**20)
    assert source["producer.override.buffer.memory"] == str(32 * 2**20)
    assert source["producer.override.compression.type"] == "zstd"
    larger = _configs({"throughput": {"max_record_bytes": 64 * 2**20}})["us->central.MirrorSourceConnector"]
    assert larger["producer.override.max.request.size"] == larger["producer.override.buffer.memory"] == str(64 * 2**20)


def test_a_zoned_platform_gives_the_source_consumer_its_workers_rack_and_nothing_else_one():
    topology = load_topology({**BASE, "flows": [{"source": "us", "target": "central"}]})
    flow = topology.flows[0]
    configs = mirror_connector_configs(flow.description(), replication_factor=1, source_bootstrap="s:1",
                                       target_bootstrap="t:1",
                                       consumer_rack="${env:NODE_ZONE}")
    racks = {name: {k: v for k, v in config.items() if "rack" in k} for name, config in configs.items()}
    assert racks == {"us->central.MirrorSourceConnector": {"source.consumer.client.rack": "${env:NODE_ZONE}"},
                     "us->central.MirrorCheckpointConnector": {}, "us->central.MirrorHeartbeatConnector": {}}
    assert not any("rack" in k for c in _configs({}).values() for k in c)  # no zones (local, docker): none
