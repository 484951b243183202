import time

import pytest
import requests

from tests.support.kafka_clients import by_partition, consume, create_topic, describe_partitions, produce
from tests.support.services import MIRROR_CONNECTORS

pytestmark = pytest.mark.integration


def test_connect_worker_lists_the_three_mirrormaker2_connectors(connect_b):
    plugins = requests.get(f"{connect_b.rest_url}/connector-plugins", timeout=10).json()
    classes = {p["class"] for p in plugins}
    assert set(MIRROR_CONNECTORS) <= classes
    versions = {p["version"] for p in plugins if p["class"] in MIRROR_CONNECTORS}
    from mirrorstack.versions import kafka_version
    assert versions == {kafka_version()}


def _wait_running(rest_url: str, name: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    status = {}
    while time.monotonic() < deadline:
        reply = requests.get(f"{rest_url}/connectors/{name}/status", timeout=5)
        if reply.ok:
            status = reply.json()
            tasks = status.get("tasks", [])
            if status["connector"]["state"] == "RUNNING" and tasks and all(t["state"] == "RUNNING" for t in tasks):
                return status
        time.sleep(1)
    raise AssertionError(f"connector {name} not RUNNING after {timeout}s: {status}")


def test_hand_configured_mirror_source_connector_copies_1000_records(kafka_a, kafka_b, connect_b):
    create_topic(kafka_a.bootstrap_servers, "orders", partitions=3, replication_factor=2)
    sent = produce(kafka_a.bootstrap_servers, "orders", 1000)

    name = "a->b.MirrorSourceConnector"
    config = {
        "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
        "source.cluster.alias": "a",
        "target.cluster.alias": "b",
        "source.cluster.bootstrap.servers": kafka_a.bootstrap_servers,
        "target.cluster.bootstrap.servers": kafka_b.bootstrap_servers,
        "topics": "orders",
        "tasks.max": "3",
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "replication.factor": "1",  # target has one broker
        "offset-syncs.topic.replication.factor": "1",
        "sync.topic.acls.enabled": "false",
    }
    reply = requests.put(f"{connect_b.rest_url}/connectors/{requests.utils.quote(name, safe='')}/config",
                         json=config, timeout=30)
    assert reply.status_code in (200, 201), reply.text
    try:
        _wait_running(connect_b.rest_url, requests.utils.quote(name, safe=""))
        copied = consume(kafka_b.bootstrap_servers, "a.orders", expected=1000, timeout=120)

        assert len(copied) == 1000
        # Same partition count on the remote topic, same records in the same
        # order within each partition (offsets may differ: not compared).
        assert sorted(describe_partitions(kafka_b.bootstrap_servers, "a.orders")) == [0, 1, 2]
        assert by_partition(copied) == by_partition(sent)
    finally:
        requests.delete(f"{connect_b.rest_url}/connectors/{requests.utils.quote(name, safe='')}", timeout=30)
