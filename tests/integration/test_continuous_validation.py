"""The continuous validation (mirrorstack.spark.streaming) on local Spark against a real Kafka
cluster, started as a process as a platform starts it, its figures read from its /metrics as
Prometheus reads them. The test copies the records itself (the replicator's part), so that it
knows exactly which copy is held back, doubled or late: a missing record is counted and named
by offset, a duplicate counted, the RPO rises while copies wait and falls when they land, the
latency agrees with the copies' own, and a restart from the checkpoint counts nothing twice."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.kafka_clients import create_topic
from tests.support.services import KafkaCluster
from tests.support.streaming_validator import StreamingValidator

pytestmark = pytest.mark.integration

PARTS = 2
WINDOW = 20  # seconds a copy may take before its record counts missing
TRIGGER = 1


def local_validator(folder: Path, bootstrap: str) -> StreamingValidator:
    """The streaming job as a process, on local[2]."""
    return StreamingValidator(folder, {"flows": [{
        "name": "edge->central", "source_bootstrap": bootstrap, "target_bootstrap": bootstrap,
        "source_alias": "edge", "topics": ["orders"]}]}, "edge.orders", window=WINDOW, trigger=TRIGGER)


def _produce(bootstrap: str, count: int, start: int) -> list[tuple]:
    """`count` records on `orders` (key, value and a header each), as delivered:
    (partition, offset, key, value, headers, timestamp)."""
    from confluent_kafka import Producer
    delivered = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(start, start + count):
        headers = [("n", str(i).encode())]  # a delivery report does not carry them
        producer.produce("orders", key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % PARTS,
                         headers=headers, on_delivery=lambda err, m, headers=headers: delivered.append(
                             (m.partition(), m.offset(), m.key(), m.value(), headers, m.timestamp()[1])))
    assert producer.flush(30) == 0 and len(delivered) == count
    return sorted(delivered)


def _copy(bootstrap: str, records: list[tuple]) -> None:
    """What MM2 would write: each record into the same partition of `edge.orders`, timestamp
    and headers kept."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for partition, _offset, key, value, headers, ts in records:
        producer.produce("edge.orders", key=key, value=value, partition=partition, headers=headers, timestamp=ts)
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    cluster = KafkaCluster("cv", tmp_path_factory.mktemp("kafka-cv"), brokers=1)
    cluster.start()
    try:
        for topic in ("orders", "edge.orders"):
            create_topic(cluster.bootstrap_servers, topic, PARTS, 1)
        yield cluster.bootstrap_servers
    finally:
        cluster.stop()


def test_missing_duplicates_rpo_latency_and_a_restart(kafka, tmp_path):
    validator = local_validator(tmp_path, kafka)
    validator.start()
    try:
        validator.until("the first batch", lambda f: "last_batch_timestamp_seconds" in f
                        and f["last_batch_timestamp_seconds"] > 0, timeout=180)
        # 30 records; one held back, one copied twice, the rest copied 3 s late
        first = _produce(kafka, 30, 0)
        held, doubled = first[7], first[12]
        waited = validator.until("the RPO of 30 uncopied records", lambda f: f["rpo_records"] == 30)
        assert 0 < waited["rpo_seconds"] < WINDOW, waited
        time.sleep(max(0.0, 3 - (time.time() - first[0][5] / 1000)))  # the replicator's lag: 3 s
        copied = [r for r in first if r is not held]
        began = time.time()
        _copy(kafka, copied + [doubled])
        settled = validator.until("29 confirmed, 1 duplicate",
                                  lambda f: f["confirmed_records_total"] == 29 and f["duplicates_records_total"] == 1)
        seen = time.time()
        assert settled["rpo_records"] == 1 and settled["missing_records_total"] == 0, settled
        # Each copy landed after this test began writing it and before it saw it confirmed (its own clock).
        # The validator counts a copy as landed midway between the batch that read it and the one before:
        # at most that batch, at least half a batch interval early. The interval is the trigger, or a batch
        # running late; the one that read the copies ran within `seen - began`, and the one before about as long.
        mean = settled["latency_seconds_sum"] / settled["latency_seconds_count"]
        low, high = (sum(t - r[5] / 1000 for r in copied) / len(copied) for t in (began, seen))
        early = max(TRIGGER, seen - began) / 2
        assert settled["latency_seconds_count"] == 29 and low - early <= mean <= high + 0.01, (low, mean, high)
        missing = validator.until("the held-back record missing", lambda f: f["missing_records_total"] == 1,
                                  timeout=WINDOW + 60)
        assert missing["rpo_records"] == 0 and missing["confirmed_records_total"] == 29, missing
        assert missing["extras_records_total"] == 0, missing
        named = f"missing: edge->central:orders partition {held[0]} offset {held[1]} (timestamp {held[5]})"
        assert named in validator.said(), validator.said()[-3000:]

        # a restart: records made and copied while it is down are counted once, nothing before again
        assert validator.stop() == 0 and "stopped: a start with the same checkpoint goes on" in validator.said()
        second = _produce(kafka, 10, 100)
        _copy(kafka, second)
        validator.start()
        validator.until("10 more confirmed", lambda f: f["confirmed_records_total"] >= 39, timeout=180)
        reached = time.time()  # then a few more batches: a count that went past 39 would show
        again = validator.until("later batches", lambda f: f["last_batch_timestamp_seconds"] > reached + 3 * TRIGGER)
        assert (again["confirmed_records_total"], again["missing_records_total"], again["duplicates_records_total"],
                again["extras_records_total"]) == (39, 1, 1, 0), again
    finally:
        validator.stop()
