"""The continuous validation (mirrorstack.spark.streaming) on local Spark against a real Kafka
cluster, started as a process as a platform starts it, its figures read from its /metrics as
Prometheus reads them. The test copies the records itself (the replicator's part), so that it
knows exactly which copy is held back, doubled or late: a missing record is counted and named
by offset, a duplicate counted, the RPO rises while copies wait and falls when they land, the
latency agrees with the copies' own, and a restart from the checkpoint counts nothing twice."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from mirrorstack import toolchain
from tests.support.kafka_clients import create_topic
from tests.support.ports import free_ports
from tests.support.services import KafkaCluster

pytestmark = pytest.mark.integration

PARTS = 2
WINDOW = 20  # seconds a copy may take before its record counts missing
TRIGGER = 1


class Validator:
    """The streaming job as a process, on local[2]."""

    def __init__(self, folder: Path, bootstrap: str):
        self.folder = folder
        self.port = free_ports(1)[0]
        self.config = folder / "flows.json"
        self.config.write_text(json.dumps({"flows": [{
            "name": "edge->central", "source_bootstrap": bootstrap, "target_bootstrap": bootstrap,
            "source_alias": "edge", "topics": ["orders"]}]}))
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        self.log = self.folder / f"validator-{self.starts}.log"
        argv = [sys.executable, "-m", "mirrorstack.spark.streaming", "--config", str(self.config),
                "--checkpoint-dir", str(self.folder / "checkpoint"), "--metrics-port", str(self.port),
                "--window-seconds", str(WINDOW), "--trigger-seconds", str(TRIGGER),
                "--jars", ",".join(str(j) for j in toolchain.spark_kafka_jars()),
                *([f"--java-options={toolchain.spark_archive_option()}"] if toolchain.spark_archive_option() else [])]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(self.log, "w"),
                                     env={**os.environ, "PYSPARK_PYTHON": sys.executable})

    def stop(self) -> int | None:
        """TERM, as a pod's or container's stop sends: its exit code."""
        proc, self.proc = self.proc, None
        if proc and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode if proc else None

    def said(self) -> str:
        return self.log.read_text(errors="replace")

    def figures(self) -> dict[str, float]:
        """name (with the histogram's _sum and _count) -> value, for the one target topic."""
        assert self.proc and self.proc.poll() is None, f"the validator ended:\n{self.said()[-3000:]}"
        try:
            text = requests.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text
        except requests.ConnectionError:
            return {}
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.labels.get("topic", "edge.orders") == "edge.orders" and "le" not in sample.labels:
                    out[sample.name.removeprefix("mirrorstack_continuous_")] = sample.value
        return out

    def until(self, what: str, check, timeout: float = 120) -> dict[str, float]:
        """The figures once `check(figures)` holds; a figure not exported yet is -1."""
        deadline = time.monotonic() + timeout
        while True:
            figures = self.figures()
            if figures and check(defaultdict(lambda: -1, figures)):
                return figures
            assert time.monotonic() < deadline, f"{what}: not within {timeout}s: {figures}\n{self.said()[-3000:]}"
            time.sleep(0.5)


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
    validator = Validator(tmp_path, kafka)
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
