import pytest

from tests.support.kafka_clients import by_partition, consume, create_topic, describe_partitions, produce

pytestmark = pytest.mark.integration


def test_two_broker_cluster_keeps_two_replicas_and_round_trips_1000_records(kafka_a):
    create_topic(kafka_a.bootstrap_servers, "roundtrip", partitions=3, replication_factor=2)

    partitions = describe_partitions(kafka_a.bootstrap_servers, "roundtrip")
    assert sorted(partitions) == [0, 1, 2]
    broker_ids = {2, 3}  # node ids after the controller (1)
    for replicas, isr in partitions.values():
        assert set(replicas) == broker_ids
        assert set(isr) == broker_ids

    sent = produce(kafka_a.bootstrap_servers, "roundtrip", 1000)
    received = consume(kafka_a.bootstrap_servers, "roundtrip", expected=1000, timeout=60)

    assert len(received) == 1000
    assert by_partition(received) == by_partition(sent)
