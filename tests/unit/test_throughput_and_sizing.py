"""Typed throughput settings, discovery interval, worker defaults and JVM/container sizing."""
from __future__ import annotations

import pytest

from benchmarks.replication import CONFIGURATIONS, KAFKA_WORKER, connector_props
from mirrorstack.connect.worker import worker_defaults, worker_properties
from mirrorstack.mirror.connectors import mirror_connector_configs, throughput_settings
from mirrorstack.model.spec import Resources, Throughput, TopologyError, load_topology

CLUSTERS = {"us": {"brokers": 1}, "central": {"brokers": 1}}


def flow_of(**fields):
    return load_topology({"clusters": CLUSTERS, "flows": [{"source": "us", "target": "central", **fields}]}).flows[0] \
        .description()


def configs_of(flow, **kwargs):
    return mirror_connector_configs(flow, replication_factor=1, source_bootstrap="us:9092",
                                    target_bootstrap="central:9092", **kwargs)


def problems(data) -> list[str]:
    with pytest.raises(TopologyError) as error:
        load_topology(data)
    return error.value.problems


def test_default_source_connector_carries_the_measured_throughput_settings():
    flow = flow_of()
    source = configs_of(flow)["us->central.MirrorSourceConnector"]
    defaults = Throughput()
    assert source["tasks.max"] == "2"
    assert source["producer.override.batch.size"] == str(defaults.batch_bytes)
    assert source["producer.override.linger.ms"] == str(defaults.linger_ms)
    assert source["producer.override.enable.idempotence"] == "true"
    assert source["producer.override.max.in.flight.requests.per.connection"] == str(defaults.in_flight)
    assert source["producer.override.compression.type"] == defaults.compression
    assert source["source.consumer.max.poll.records"] == str(defaults.poll_records)
    assert source["producer.override.send.buffer.bytes"] == "-1"
    assert source["source.consumer.receive.buffer.bytes"] == "-1"
    # MM2's own target.producer.* would do nothing in Connect mode: never generated.
    assert not [k for k in source if k.startswith("target.producer.")]


def test_typed_fields_map_to_their_prefixes_and_raw_overrides_still_win():
    flow = flow_of(throughput={"batch_bytes": 65536, "linger_ms": 0, "in_flight": 1, "compression": "zstd",
                               "poll_records": 500},
                   overrides={"source": {"producer.override.linger.ms": "7"}})
    source = configs_of(flow)["us->central.MirrorSourceConnector"]
    assert source["producer.override.batch.size"] == "65536"
    assert source["producer.override.max.in.flight.requests.per.connection"] == "1"
    assert source["producer.override.compression.type"] == "zstd"
    assert source["source.consumer.max.poll.records"] == "500"
    assert source["producer.override.linger.ms"] == "7"  # overrides are applied last
    assert set(throughput_settings(flow)) <= set(source)


def test_only_the_source_connector_is_tuned():
    configs = configs_of(flow_of())
    for name in ("us->central.MirrorCheckpointConnector", "us->central.MirrorHeartbeatConnector"):
        assert not set(throughput_settings(flow_of())) & set(configs[name])


def test_discovery_interval_defaults_to_a_minute_for_topics_and_groups():
    configs = configs_of(flow_of())
    assert configs["us->central.MirrorSourceConnector"]["refresh.topics.interval.seconds"] == "60"
    assert configs["us->central.MirrorCheckpointConnector"]["refresh.groups.interval.seconds"] == "60"
    fast = configs_of(flow_of(refresh_seconds=10))
    assert fast["us->central.MirrorSourceConnector"]["refresh.topics.interval.seconds"] == "10"


@pytest.mark.parametrize("field, value, fragment", [
    ("in_flight", 6, "flows[0].throughput.in_flight"),
    ("compression", "brotli", "flows[0].throughput.compression"),
    ("batch_bytes", 10, "flows[0].throughput.batch_bytes"),
    ("poll_records", "500", "flows[0].throughput.poll_records"),
])
def test_bad_throughput_values_are_refused_with_their_path(field, value, fragment):
    found = problems({"clusters": CLUSTERS, "flows": [{"source": "us", "target": "central",
                                                        "throughput": {field: value}}]})
    assert any(p.startswith(fragment) and "fix" in p for p in found), found


def test_shipped_stacks_leave_discovery_to_the_default_except_the_demo():
    import yaml
    from pathlib import Path
    for path in Path(__file__).parents[2].joinpath("stacks").glob("Pulumi.*.yaml"):
        text = path.read_text()
        assert "refresh.topics.interval.seconds" not in text and "refresh.groups.interval.seconds" not in text, path
        flows = yaml.safe_load(text)["config"]["mirrorstack:topology"]["flows"]
        expected = 10 if path.name == "Pulumi.aggregation.yaml" else None
        assert {f.get("refresh_seconds") for f in flows} == {expected}, path


@pytest.mark.parametrize("key, default, kafkas", [
    # source offsets committed every 5 s: a crashed worker's tasks re-copy 5 s of records, not a minute's
    ("offset.flush.interval.ms", "5000", "60000"),
    # a stopping task may wait offset.flush.timeout.ms for its records and still commit their offsets
    ("task.shutdown.graceful.timeout.ms", "10000", "5000"),
    # a departed worker's connectors reassigned within 10 s: Kafka holds them UNASSIGNED up to 5 minutes,
    # past a roll's health wait; and a worker keeps its tasks while its group coordinator moves
    ("scheduled.rebalance.max.delay.ms", "10000", "300000"),
])
def test_worker_defaults_where_kafkas_do_not_fit_unless_set(key, default, kafkas):
    props = worker_properties("g", bootstrap_servers="b:9092", host="h", rest_port=8083, kafka_broker_count=1)
    assert props[key] == default == worker_defaults()[key]
    props = worker_properties("g", bootstrap_servers="b:9092", host="h", rest_port=8083, kafka_broker_count=1,
                              overrides={key: kafkas})
    assert props[key] == kafkas


def test_workers_find_plugins_by_their_manifests_unless_set():
    props = worker_properties("g", bootstrap_servers="b:9092", host="h", rest_port=8083, kafka_broker_count=1)
    assert props["plugin.discovery"] == "service_load"
    props = worker_properties("g", bootstrap_servers="b:9092", host="h", rest_port=8083, kafka_broker_count=1,
                              overrides={"plugin.discovery": "hybrid_warn"})
    assert props["plugin.discovery"] == "hybrid_warn"


def test_resources_default_to_a_1g_heap_and_a_container_of_twice_that_plus_256():
    assert Resources().heap == "1g" and Resources().container_memory_mib == 2304
    assert Resources(heap="512m").container_memory_mib == 1280
    assert Resources(heap="2g", memory_mib=3000).container_memory_mib == 3000


def test_resources_refused_where_they_cannot_apply_or_cannot_fit():
    found = problems({"clusters": {"us": {"resources": {"heap": "2g", "memory_mib": 1024}}, "central": {}},
                      "flows": [{"source": "us", "target": "central"}]})
    assert any(p.startswith("clusters.us.resources") and "fix: at least 2304" in p for p in found), found
    found = problems({"clusters": {"us": {"resources": {"heap": "2 GB"}}, "central": {}},
                      "flows": [{"source": "us", "target": "central"}]})
    assert any(p.startswith("clusters.us.resources.heap") for p in found), found
    found = problems({"clusters": {"us": {"external": {"bootstrap_servers": "us:9092"}, "resources": {"heap": "2g"}},
                                   "central": {}},
                      "flows": [{"source": "us", "target": "central"}]})
    assert any(p.startswith("clusters.us.resources") and "deployed" in p for p in found), found
    found = problems({"clusters": CLUSTERS, "connect": {"ext": {"kafka": "central", "resources": {"heap": "2g"},
                                                               "external": {"urls": ["http://c:8083"]}}},
                      "flows": [{"source": "us", "target": "central", "connect": "ext"}]})
    assert any(p.startswith("connect.ext.resources") for p in found), found



def test_jvm_options_are_checked_before_anything_is_deployed():
    assert Resources(jvm_options=["-XX:TieredStopAtLevel=1", "-Dfoo=bar", "-Xss1m"]).jvm_options[0] == \
        "-XX:TieredStopAtLevel=1"
    found = problems({"clusters": {"us": {"resources": {"jvm_options": ["-Xmx4g"]}}, "central": {}},
                      "flows": [{"source": "us", "target": "central"}]})
    assert any(p.startswith("clusters.us.resources.jvm_options") and "the heap is `heap`" in p for p in found), found
    found = problems({"clusters": CLUSTERS, "connect": {"c": {"kafka": "central",
                                                              "resources": {"jvm_options": ["-Dssl.password=x"]}}},
                      "flows": [{"source": "us", "target": "central", "connect": "c"}]})
    assert any(p.startswith("connect.c.resources.jvm_options") and "looks like a secret" in p for p in found), found


class _Worker:
    rest_url = "http://127.0.0.1:1"


class _Site:
    """Enough of benchmarks.replication.Site for connector_props (wan-push)."""

    class scenario:
        connect_near = "source"

    workers = {name: _Worker() for name in CONFIGURATIONS}

    def bootstraps(self):
        return "127.0.0.1:1", "127.0.0.1:2"


def test_benchmark_configurations_are_what_they_claim():
    flows = {name: connector_props(_Site(), config, "src", "bench")["connectors"]["src->dst.MirrorSourceConnector"]
             for name, config in CONFIGURATIONS.items()}
    tuned = set(throughput_settings(flow_of()))
    assert tuned <= set(flows["mirrorstack"]) and tuned <= set(flows["per-partition"])
    assert flows["per-partition"]["tasks.max"] == "6" and flows["mirrorstack"]["tasks.max"] == "2"
    assert not tuned & set(flows["seed"]) and flows["seed"]["tasks.max"] == "2"  # Kafka's defaults
    assert flows["strimzi"]["producer.override.batch.size"] == "327680"
    assert flows["strimzi"]["producer.override.linger.ms"] == "100"
    assert flows["strimzi"]["consumer.fetch.max.bytes"] == "52428800"
    assert not (tuned - {"producer.override.batch.size", "producer.override.linger.ms"}) & set(flows["strimzi"])
    for config in flows.values():  # wan-push: every configuration produces to the target
        assert config["producer.override.bootstrap.servers"] == "127.0.0.1:2"
    assert CONFIGURATIONS["mirrorstack"].worker == worker_defaults()
    assert CONFIGURATIONS["seed"].worker == KAFKA_WORKER
