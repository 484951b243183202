"""spark/validate_replication.py against real Kafka.

Faults are injected without MM2: a "source" topic on kafka_a and its remote
topic on kafka_b are written here with confluent-kafka (same partitions,
timestamps, keys, values and headers), then the copy is altered. One test runs
a real MM2 flow (source + checkpoint connectors on connect_b) and checks the
offset-translation failover from MM2's own checkpoint records.

The job runs in-process on one module-wide local[2] session (stopped with its
JVM at the end by tests.support.spark), except the CLI test, which runs it as
`python spark/validate_replication.py` (the checkout on PYTHONPATH) and through
spark-submit with the package's zip on `--py-files`, and checks its JVM is gone
afterwards.
"""
from __future__ import annotations

import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from urllib.parse import quote

import pytest
import requests
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorstack import toolchain
from mirrorstack.mirror.connectors import mirror_connector_configs
from mirrorstack.platforms.local import spark_job
from mirrorstack.platforms.local.handed_out_job import HandedOutJobProvider
from mirrorstack.platforms.local.spark_job import LocalSparkJobProvider
from mirrorstack.validation.job_config import handed_out_argv
from mirrorstack.validation.outcome import JOB_OUTPUT
from mirrorstack.validation.package import ZIP_NAME, job_zip
from mirrorstack.mirror.provider import MirrorMaker2Provider
from mirrorstack.model.spec import load_topology
from mirrorstack.platforms.local import launcher
from mirrorstack.spark.checkpoints import checkpoints_frame
from mirrorstack.spark.cli import main
from mirrorstack.mm2.records import decode_checkpoint_key, decode_checkpoint_value, encode_checkpoint
from tests.support.kafka_clients import committed_offsets, consume, create_topic
from tests.support.services import KafkaCluster
from tests.support.spark import local_spark
from tests.support.ports import free_ports
from tests.support.spark_cluster import ConnectServer, StandaloneCluster
from tests.support.streaming_validator import StreamingValidator

pytestmark = pytest.mark.integration

PROJECT = Path(__file__).resolve().parents[2]
PARTITIONS = 2
ALIAS = "vja"  # the source alias of the hand-made default-policy flows


@dataclass(frozen=True)
class Msg:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp: int


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def spark():
    with local_spark("test-validation-job") as session:
        yield session


@pytest.fixture(scope="module", autouse=True)
def _kafka_c_starting(tmp_path_factory):
    """kafka_c's start, begun with the module (in the background, while the
    first tests run): the future of the started cluster. Stopped at the end."""
    cluster = KafkaCluster("c", tmp_path_factory.mktemp("kafka-c"), brokers=1)
    pool = ThreadPoolExecutor(1)
    started = pool.submit(cluster.start)
    try:
        yield started
    finally:
        pool.shutdown(wait=True)  # a start still under way ends first: then everything it started stops
        cluster.stop()


@pytest.fixture(scope="module")
def kafka_c(_kafka_c_starting):
    """A third cluster, so two same-named source topics can merge into kafka_b."""
    return _kafka_c_starting.result(timeout=300)


# ------------------------------------------------------------------- helpers

def source_records(prefix: str, count: int, partitions: int = PARTITIONS) -> list[tuple]:
    """(partition, key, value, headers, timestamp) with null keys, tombstones,
    repeated keys, headers (one with a null value) and exact twins (every
    100th record repeats the previous one, timestamp included)."""
    base = int(time.time() * 1000) - 3_600_000
    records: list[tuple] = []
    for i in range(count):
        if i % 100 == 99:
            records.append(records[-1])
            continue
        key = None if i % 50 == 7 else f"{prefix}-key-{i % 97}".encode()
        value = None if i % 125 == 3 else f"{prefix}-value-{i}".encode()
        headers = (("trace", f"{prefix}-{i}".encode()), ("kind", None if i % 3 == 0 else b"order"))
        records.append((i % partitions, key, value, headers, base + i))
    return records


def produce_records(bootstrap: str, topic: str, records) -> None:
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    for partition, key, value, headers, timestamp in records:
        producer.produce(topic, key=key, value=value, partition=partition, timestamp=timestamp,
                         headers=list(headers), on_delivery=lambda err, _m: err and errors.append(err))
        producer.poll(0)
    assert producer.flush(60) == 0 and not errors, errors[:3]


def copy_records(bootstrap: str, topic: str, msgs) -> None:
    """Write `msgs` to `topic`, each into its own partition with its own timestamp."""
    produce_records(bootstrap, topic, [(m.partition, m.key, m.value, m.headers, m.timestamp) for m in msgs])


def read_all(bootstrap: str, topic: str) -> list[Msg]:
    """Everything in `topic`, in (partition, offset) order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"vj-read-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    try:
        parts = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        msgs: list[Msg] = []
        deadline = time.monotonic() + 60
        while len(msgs) < sum(ends.values()) and time.monotonic() < deadline:
            for m in consumer.consume(500, timeout=1.0):
                if not m.error():
                    msgs.append(Msg(m.partition(), m.offset(), m.key(), m.value(),
                                    tuple(m.headers() or ()), m.timestamp()[1]))
    finally:
        consumer.close()
    assert len(msgs) == sum(ends.values())
    return sorted(msgs, key=lambda m: (m.partition, m.offset))


def setup_pair(kafka_a, kafka_b, name: str, count: int = 1000) -> tuple[str, str, list[Msg]]:
    """A source topic with `count` records on kafka_a and its empty remote topic on kafka_b."""
    topic = f"vj-{name}"
    create_topic(kafka_a.bootstrap_servers, topic, partitions=PARTITIONS, replication_factor=2)
    produce_records(kafka_a.bootstrap_servers, topic, source_records(name, count))
    remote = f"{ALIAS}.{topic}"
    create_topic(kafka_b.bootstrap_servers, remote, partitions=PARTITIONS, replication_factor=1)
    return topic, remote, read_all(kafka_a.bootstrap_servers, topic)


def config(kafka_a, kafka_b, topic: str, wait_seconds: float = 60, **extra) -> dict:
    return {"flows": [{"name": "a->b", "source_bootstrap": kafka_a.bootstrap_servers,
                       "target_bootstrap": kafka_b.bootstrap_servers, "source_alias": ALIAS,
                       "policy": "default", "topics": [topic]}],
            "wait_seconds": wait_seconds, **extra}


def validate(spark, tmp_path, cfg: dict, *args: str) -> tuple[int, dict]:
    out = tmp_path / f"report-{uuid.uuid4().hex[:8]}.json"
    code = main(["--config-json", json.dumps(cfg), "--out", str(out), "--poll-seconds", "1", *args],
                     spark=spark)
    return code, json.loads(out.read_text())


def validate_at_once(spark, tmp_path, *runs: tuple) -> list[tuple[int, dict]]:
    """Independent runs, each (config, *flags), at once on the module's session;
    [(exit code, report)] in their order. A run on a few hundred records is
    mostly waits (Spark's scheduling, the brokers): runs side by side overlap."""
    with ThreadPoolExecutor(len(runs)) as pool:
        futures = [pool.submit(validate, spark, tmp_path, *run) for run in runs]
    return [future.result() for future in futures]


def counts(group: dict) -> dict:
    keys = ("source_records", "target_records", "matched", "missing", "in_flight", "duplicates", "extras",
            "out_of_order")
    return {k: group[k] for k in keys}


def exact(n: int, **changes) -> dict:
    return {"source_records": n, "target_records": n, "matched": n, "missing": 0, "in_flight": 0,
            "duplicates": 0, "extras": 0, "out_of_order": 0, **changes}


def middle(src: list[Msg], how_many: int, step: int = 111) -> list[Msg]:
    """Records well inside their partitions (never the tail), not twins."""
    picked, i = [], 40
    while len(picked) < how_many:
        m = src[i]
        twins = [o for o in src if (o.partition, o.key, o.value, o.headers, o.timestamp) ==
                 (m.partition, m.key, m.value, m.headers, m.timestamp)]
        if len(twins) == 1:
            picked.append(m)
        i += step
    return picked


# --------------------------------------------------------------------- tests

def test_clean_copy_passes_with_exact_counts(spark, tmp_path, kafka_a, kafka_b):
    topic, remote, src = setup_pair(kafka_a, kafka_b, "clean")
    copy_records(kafka_b.bootstrap_servers, remote, src)

    # (the second run, below: the same verdict with Spark aggregates, run alongside)
    (code, report), spark_run = validate_at_once(spark, tmp_path, (config(kafka_a, kafka_b, topic),),
                                                 (config(kafka_a, kafka_b, topic), "--offsets-via", "spark"))
    assert code == 0 and report["passed"] and report["failures"] == []
    assert report["offsets_via"] == "kafka-client"
    [group] = report["groups"]
    assert group["topic"] == remote and group["flows"] == ["a->b"]
    assert counts(group) == exact(1000)
    assert group["partitions_ok"] and group["target_partitions"] == PARTITIONS
    assert not group["timed_out"] and group["samples"] == {} and group["failover"] == []
    per_partition = [sum(m.partition == p for m in src) for p in range(PARTITIONS)]  # 510/490: twins
    assert [(r["partition"], r["expected"], r["lag"]) for r in group["lag"]] == \
        [(p, n, 0) for p, n in enumerate(per_partition)]
    assert group["sources"][0]["window"] == {str(p): [0, n] for p, n in enumerate(per_partition)}
    assert report["flows"] == [{"name": "a->b", "topics": [
        {"topic": topic, "remote_topic": remote, "group": 0, "source_records": 1000, "matched": 1000,
         "missing": 0, "in_flight": 0, "duplicates": 0, "out_of_order": 0, "purged": 0}]}]

    # the same verdict with offsets and partition counts from Spark aggregates instead of confluent_kafka
    code, report = spark_run
    assert code == 0 and report["offsets_via"] == "spark"
    assert counts(report["groups"][0]) == exact(1000) and report["groups"][0]["partitions_ok"]


def test_seven_deleted_records_are_missing(spark, tmp_path, kafka_a, kafka_b):
    topic, remote, src = setup_pair(kafka_a, kafka_b, "deleted")
    gone = middle(src, 7)
    copy_records(kafka_b.bootstrap_servers, remote, [m for m in src if m not in gone])

    code, report = validate(spark, tmp_path, config(kafka_a, kafka_b, topic, wait_seconds=3))
    [group] = report["groups"]
    assert code == 1 and not report["passed"]
    assert group["timed_out"]  # 993 < 1000 arrived: the bound expired, but the gaps are not at the tail
    assert counts(group) == exact(1000, target_records=993, matched=993, missing=7)
    assert {(s["partition"], s["source_offset"]) for s in group["samples"]["missing"]} <= \
        {(m.partition, m.offset) for m in gone}
    assert len(group["samples"]["missing"]) == 5
    assert any("missing 7 > tolerance 0" in f for f in report["failures"])


def test_five_records_copied_twice_are_duplicates(spark, tmp_path, kafka_a, kafka_b):
    topic, remote, src = setup_pair(kafka_a, kafka_b, "dups")
    twice = middle(src, 5)
    copy_records(kafka_b.bootstrap_servers, remote, [c for m in src for c in ([m, m] if m in twice else [m])])

    (code, report), tolerated = validate_at_once(
        spark, tmp_path, (config(kafka_a, kafka_b, topic),),
        (config(kafka_a, kafka_b, topic, tolerance={"duplicates": 5}),))
    [group] = report["groups"]
    assert code == 1
    assert counts(group) == exact(1000, target_records=1005, duplicates=5)
    assert {(s["partition"], s["source_offset"]) for s in group["samples"]["duplicates"]} == \
        {(m.partition, m.offset) for m in twice}
    assert report["flows"][0]["topics"][0]["duplicates"] == 5  # counted for the flow they copy

    # tolerated, the same copy passes
    code, report = tolerated
    assert code == 0 and report["passed"]


def test_two_swapped_records_are_out_of_order(spark, tmp_path, kafka_a, kafka_b):
    topic, remote, src = setup_pair(kafka_a, kafka_b, "swap")
    [first] = middle(src, 1)
    i = src.index(first)
    assert src[i + 1].partition == first.partition and src[i + 1].value != first.value
    swapped = src[:i] + [src[i + 1], src[i]] + src[i + 2:]
    copy_records(kafka_b.bootstrap_servers, remote, swapped)

    code, report = validate(spark, tmp_path, config(kafka_a, kafka_b, topic))
    [group] = report["groups"]
    assert code == 1
    assert group["out_of_order"] >= 1
    assert counts(group) == exact(1000, out_of_order=group["out_of_order"])
    [sample] = group["samples"]["out_of_order"]
    assert (sample["partition"], sample["source_offset"], sample["previous_source_offset"]) == \
        (first.partition, first.offset, first.offset + 1)


def test_the_job_reads_kafka_through_the_v2_scan_and_the_continuous_validator_keeps_sparks_default(spark):
    """The batch job's Kafka reads are Spark's DataSource V2 scan (binary rows built directly), not
    the V1 relation Spark picks for kafka by default (a JVM Row per record and back); the continuous
    validator's session keeps the default. Only analysed: no broker is asked."""
    from mirrorstack.spark.spark_io import V1_SOURCES, job_settings

    def analysed():
        frame = (spark.read.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9")
                 .option("subscribe", "t").load())
        return frame._jdf.queryExecution().analyzed().toString()

    spark.conf.unset(V1_SOURCES)  # Spark's default again (an earlier run in this session set it)
    try:
        job_settings(spark, kafka_v2=False)
        assert "kafka" in spark.conf.get(V1_SOURCES).split(",")
        assert "KafkaRelation" in analysed()
        job_settings(spark)
        assert "kafka" not in spark.conf.get(V1_SOURCES).split(",")
        plan = analysed()
        assert "RelationV2" in plan and "KafkaTable" in plan and "KafkaRelation" not in plan, plan
    finally:
        job_settings(spark)


def test_the_match_key_tells_apart_what_differs_only_by_nulls_empties_or_places(spark):
    """Records whose bytes differ only in where a value sits (key or value, which header), or in a
    null against an empty value, get different digests; identical records the same."""
    from spark.spark_io import hashed_records
    from pyspark.sql import Row
    ts = datetime.datetime(2026, 11, 29, tzinfo=datetime.timezone.utc)
    variants = [(None, b"x", None), (b"x", None, None), (b"", b"x", None),
                (None, b"x", [Row(key="a", value=None)]), (None, b"x", [Row(key="a", value=b"")]),
                (None, b"x", [Row(key="a", value=b"1"), Row(key="b", value=b"2")]),
                (None, b"x", [Row(key="b", value=b"2"), Row(key="a", value=b"1")]),
                (b"ab", b"c", None), (b"a", b"bc", None)]
    rows = [Row(key=k, value=v, headers=h, partition=0, offset=i, timestamp=ts) for i, (k, v, h) in
            enumerate(variants + variants[:1] + [(None, b"x", [])])]
    frame = spark.createDataFrame(rows, "key binary, value binary, headers array<struct<key:string,value:binary>>, "
                                        "partition int, offset long, timestamp timestamp")
    digests = [(r["h1"], r["h2"]) for r in hashed_records(frame).orderBy("offset").collect()]
    # the same record again; no headers read as an empty list (Kafka has no null list of headers)
    assert digests[-2] == digests[-1] == digests[0]
    distinct = set(digests[:-2])
    assert len(distinct) == len(variants), digests


def test_keys_seen_once_and_keys_seen_often_pair_the_same_way(spark):
    """The classification's two paths, side by side: keys seen at most once a side (counted in
    fixed-width aggregates) and keys repeated on either side (paired in lists), for two sources
    with offsets beyond 32 bits; and a wait that ran out (in flight, stalled)."""
    from types import SimpleNamespace
    from pyspark.sql import functions as F
    from spark.reconcile import Validator
    big = 1 << 40
    key = {name: (int(name == "g"), 1_000 + i, i, -i) for i, name in enumerate("abcdefgh")}  # g: partition 1
    source = [("a", 0, big), ("b", 1, big + 1), ("c", 0, 7), ("c", 0, 8), ("c", 1, 3), ("d", 1, 4),
              ("e", 0, 9), ("e", 1, 5), ("f", 0, big + 2), ("g", 1, 6)]
    target = [("a", 10), ("b", 11), ("c", 12), ("c", 13), ("d", 14), ("d", 15), ("d", 16), ("e", 17),
              ("h", 18), ("h", 19)]
    frame = spark.createDataFrame
    src = frame([(*key[k], off, s) for k, s, off in source], "partition int, ts long, h1 long, h2 long, "
                                                               "offset long, src int")
    tgt = frame([(*key[k], off) for k, off in target], "partition int, ts long, h1 long, h2 long, offset long")
    validator = Validator(SimpleNamespace(window_seconds=None), spark, "spark", 1.0, 10)
    def counted(rows) -> dict:
        return {(r["src"], r["partition"], r["kind"]): r["count"] for r in rows}
    try:
        classified, counts = validator.classify(src, tgt, timed_out=False, moving=set())
        got = sorted((r["kind"], r["src"], r["s_offset"], r["t_offset"], r["partner"]) for r in classified.collect())
        assert counted(counts) == counted(classified.groupBy("src", "partition", "kind").count().collect())
        # the matched pairs' least and greatest target-minus-source offset, which spare the order check's
        # sort where they are equal: a, c (twice) and e from source 0; b and d from source 1
        shifts = {(r["src"], r["partition"]): (r["shift_min"], r["shift_max"]) for r in counts if r["kind"] == "matched"}
        assert shifts == {(0, 0): (10 - big, 8), (1, 0): (10 - big, 10)}, shifts
        classified, _ = validator.classify(src, tgt, timed_out=True, moving={0})
        waited_out = {(r["src"], r["s_offset"]): r["kind"] for r in classified.collect()
                      if r["kind"] in ("in_flight", "stalled")}
        # keys seen once only (no lists): the counts come from the first pass, the same as the rows'
        once = [k for k in key if sum(1 for n, _, _ in source if n == k) < 2 and sum(1 for n, _ in target if n == k) < 2]
        classified, counts = validator.classify(src.where(F.col("h1").isin([key[k][2] for k in once])),
                                                tgt.where(F.col("h1").isin([key[k][2] for k in once])),
                                                timed_out=True, moving={0})
        assert counted(counts) == counted(classified.groupBy("src", "partition", "kind").count().collect()) == {
            (0, 0, "matched"): 1, (1, 0, "matched"): 1, (0, 0, "in_flight"): 1, (1, 1, "stalled"): 1}, counts
    finally:
        for kept in validator.persisted:
            kept.unpersist()
    assert got == sorted([
        ("matched", 0, big, 10, None), ("matched", 1, big + 1, 11, None),  # seen once a side
        ("matched", 0, 7, 12, 7), ("matched", 0, 8, 13, 7), ("missing", 1, 3, None, 7),  # c: 3 sources, 2 copies
        ("matched", 1, 4, 14, 4), ("duplicates", 1, None, 15, 4), ("duplicates", 1, None, 16, 4),
        ("matched", 0, 9, 17, 9), ("missing", 1, 5, None, 9),  # e: same record from both sources, one copy
        ("missing", 0, big + 2, None, None), ("missing", 1, 6, None, None),
        ("extras", None, None, 18, None), ("extras", None, None, 19, None)])
    # after their source's last match in their partition: 0 took records during the wait, 1 did not
    assert waited_out == {(0, big + 2): "in_flight", (1, 6): "stalled"}, waited_out


def test_three_records_written_into_the_target_are_extras(spark, tmp_path, kafka_a, kafka_b):
    topic, remote, src = setup_pair(kafka_a, kafka_b, "extras")
    copy_records(kafka_b.bootstrap_servers, remote, src)
    now = int(time.time() * 1000)
    produce_records(kafka_b.bootstrap_servers, remote,
                    [(i % PARTITIONS, b"intruder", f"intruder-{i}".encode(), (), now + i) for i in range(3)])

    (code, report), tolerated = validate_at_once(
        spark, tmp_path, (config(kafka_a, kafka_b, topic),),
        (config(kafka_a, kafka_b, topic, tolerance={"extras": 3}),))
    [group] = report["groups"]
    assert code == 1
    assert counts(group) == exact(1000, target_records=1003, extras=3)
    assert len(group["samples"]["extras"]) == 3
    copies = {p: sum(m.partition == p for m in src) for p in range(PARTITIONS)}
    assert all(s["source_offset"] is None and s["target_offset"] >= copies[s["partition"]]
               for s in group["samples"]["extras"])

    code, report = tolerated
    assert code == 0 and report["passed"]


def copy_in_transactions(bootstrap: str, topic: str, msgs) -> None:
    """Write `msgs` as an exactly-once flow's target holds them: each in its own
    transaction, so every record is followed by a commit marker (one offset more)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"vj-tx-{uuid.uuid4().hex}"})
    producer.init_transactions(60)
    for m in msgs:
        producer.begin_transaction()
        producer.produce(topic, key=m.key, value=m.value, partition=m.partition, timestamp=m.timestamp,
                         headers=list(m.headers))
        producer.commit_transaction(60)


def test_the_wait_counts_a_transactional_targets_records_not_its_offsets(spark, tmp_path, kafka_a, kafka_b):
    """Issue 46: on an exactly-once target the wait compared offsets (records and commit
    markers) with the sources' records; 3 of 4 records copied, each with its marker,
    were 1.5 times the count, so the wait ended at once and called the rest missing."""
    topic, remote, src = setup_pair(kafka_a, kafka_b, "markers", count=40)
    per_partition = {p: sum(m.partition == p for m in src) for p in range(PARTITIONS)}
    copied = [m for m in src if m.offset < per_partition[m.partition] * 3 // 4]
    copy_in_transactions(kafka_b.bootstrap_servers, remote, copied)
    cfg = config(kafka_a, kafka_b, topic, wait_seconds=3)
    cfg["flows"][0]["target_client"] = {"isolation.level": "read_committed"}

    code, report = validate(spark, tmp_path, cfg)
    [group] = report["groups"]
    assert code == 1
    assert group["timed_out"], group  # waited for the quarter still to come (before: "hold the expected records")
    assert group["source_records"] == 40 and group["target_records"] == len(copied) == 30
    assert group["matched"] == 30 and group["missing"] + group["in_flight"] == 10


def test_a_source_whose_offsets_overcount_its_records_is_counted_before_the_wait(spark, tmp_path, kafka_a,
                                                                                   kafka_b):
    """A complete copy is validated without a wait by its offsets alone (the sources are read once);
    an exactly-once source's offsets count its commit markers too (80 offsets, 40 records), so there
    the job counts the records before it waits: the copy passes at once, exact counts, no timeout."""
    topic, remote = "vj-tx-source", f"{ALIAS}.vj-tx-source"
    create_topic(kafka_a.bootstrap_servers, topic, partitions=PARTITIONS, replication_factor=2)
    records = [Msg(partition=r[0], offset=-1, key=r[1], value=r[2], headers=r[3], timestamp=r[4])
               for r in source_records("txs", 40)]
    copy_in_transactions(kafka_a.bootstrap_servers, topic, records)
    create_topic(kafka_b.bootstrap_servers, remote, partitions=PARTITIONS, replication_factor=1)
    copy_records(kafka_b.bootstrap_servers, remote, records)
    cfg = config(kafka_a, kafka_b, topic, wait_seconds=30)
    cfg["flows"][0]["source_client"] = {"isolation.level": "read_committed"}

    code, report = validate(spark, tmp_path, cfg)
    [group] = report["groups"]
    assert code == 0 and not group["timed_out"] and group["waited_seconds"] < 10, group
    assert sum(end - begin for begin, end in group["sources"][0]["window"].values()) == 80  # the offsets
    assert counts(group) == exact(40)
    assert [r["expected"] for r in group["lag"]] == [40 // PARTITIONS] * PARTITIONS


class _OtherWriter(threading.Thread):
    """Another producer writing into partition 0 of the target (records no source
    has: extras) about 10 times a second: that partition takes records, the other
    none. Capped, so the target never reaches the source window's count."""

    def __init__(self, bootstrap: str, topic: str, cap: int):
        super().__init__(daemon=True)
        self.producer, self.topic, self.cap = Producer({"bootstrap.servers": bootstrap, "acks": "all"}), topic, cap
        self.stop, self.written = threading.Event(), 0

    def run(self) -> None:
        while not self.stop.is_set() and self.written < self.cap:
            self.producer.produce(self.topic, key=f"other-{self.written}".encode(), value=b"x", partition=0)
            self.producer.flush(10)
            self.written += 1
            self.stop.wait(0.1)


def test_a_tail_is_in_flight_only_where_the_target_took_records_during_the_wait(spark, tmp_path, kafka_a, kafka_b):
    topic, remote, src = setup_pair(kafka_a, kafka_b, "tail")
    ends = {p: max(m.offset for m in src if m.partition == p) + 1 for p in range(PARTITIONS)}
    tail = {(m.partition, m.offset) for m in src if m.offset >= ends[m.partition] - 300}  # last 300 per partition
    copy_records(kafka_b.bootstrap_servers, remote, [m for m in src if (m.partition, m.offset) not in tail])
    lenient = {"extras": None, "missing": 300}

    # partition 0 of the target takes records throughout the wait, partition 1 nothing
    writer = _OtherWriter(kafka_b.bootstrap_servers, remote, cap=550)  # 400 copied + 550 < 1000: the wait times out
    writer.start()
    try:
        (bounded_code, bounded), (code, report) = validate_at_once(
            spark, tmp_path, (config(kafka_a, kafka_b, topic, wait_seconds=3, tolerance=lenient),),
            (config(kafka_a, kafka_b, topic, wait_seconds=3, tolerance={**lenient, "in_flight": 300}),))
    finally:
        writer.stop.set()
        writer.join(30)
    [group] = report["groups"]
    assert group["timed_out"] and 3 <= group["waited_seconds"] < 30
    assert (group["source_records"], group["matched"], group["in_flight"], group["missing"]) == (1000, 400, 300, 300)
    assert group["stalled"] == 300 and group["stalled_partitions"] == [1]
    assert {s["partition"] for s in group["samples"]["in_flight"]} == {0}
    assert all((s["partition"], s["source_offset"]) in tail and "on its way" in s["why"]
               for s in group["samples"]["in_flight"])
    assert {s["partition"] for s in group["samples"]["missing"]} == {1}
    assert all("took no record during the wait: stuck" in s["why"] for s in group["samples"]["missing"])
    assert code == 0 and report["passed"], report["failures"]  # tolerance.in_flight 300 allows them
    assert [(r["partition"], r["lag"]) for r in group["lag"]] == [(0, 300), (1, 300)]
    # without tolerance.in_flight the bound is what the target took in the wait, scaled to
    # another wait: about 30 records at 10 a second, far from 300
    [limited] = bounded["groups"]
    assert bounded_code == 1 and 0 < limited["in_flight_bound"] < 300, limited["in_flight_bound"]
    assert any(f"in_flight 300 > {limited['in_flight_bound']}, what the target takes in another" in f
               for f in bounded["failures"]), bounded["failures"]

    # nothing moves: the whole tail is stuck, counted missing, and fails by default
    code, report = validate(spark, tmp_path, config(kafka_a, kafka_b, topic, wait_seconds=2,
                                                    tolerance={"extras": None}))
    [group] = report["groups"]
    assert (group["in_flight"], group["missing"], group["stalled"], group["stalled_partitions"]) == (0, 600, 600, [0, 1])
    assert code == 1 and any("missing 600 > tolerance 0" in f for f in report["failures"]), report["failures"]


class _Mirroring(threading.Thread):
    """An application writing into the source while a stand-in for MM2 copies each
    record to the target (same partition, key, value, headers and timestamp), about
    30 a second until stopped: records keep arriving on both sides while the job runs.
    Partition 1's copies are made at once, partition 0's LAG records behind (in order,
    as MM2's tasks may run unevenly): the job waits for partition 0 to hold its
    snapshot, and partition 1 meanwhile takes copies of records newer than the
    snapshot, however fast the job runs."""

    LAG = 4

    def __init__(self, source: str, target: str, topic: str, remote: str):
        super().__init__(daemon=True)
        self.source, self.target = (Producer({"bootstrap.servers": b, "acks": "all"}) for b in (source, target))
        self.topic, self.remote, self.stop, self.copied = topic, remote, threading.Event(), 0
        self.behind: list[dict] = []  # partition 0's records not copied yet

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            record = dict(partition=n % PARTITIONS, key=f"live-{n}".encode(), value=b"live",
                          timestamp=int(time.time() * 1000))
            self.source.produce(self.topic, **record)
            self.source.flush(10)
            n += 1
            if record["partition"]:
                copies = [record]
            else:
                self.behind.append(record)
                copies, self.behind = self.behind[:-self.LAG], self.behind[-self.LAG:]
            for copy in copies:
                self.target.produce(self.remote, **copy)
            self.target.flush(10)
            self.copied += len(copies)
            self.stop.wait(0.03)
        self.source = self.target = None  # closed: they would retry the clusters (and log it) until the module ends


def test_records_written_and_copied_while_the_job_runs_are_no_extras(spark, tmp_path, kafka_a, kafka_b):
    """Applications do not stop for a validation: the copies of records the source
    took after the job's snapshot are set aside (the next run checks them), not
    counted as extras; every record of the snapshot is matched."""
    topic, remote, src = setup_pair(kafka_a, kafka_b, "live")
    copy_records(kafka_b.bootstrap_servers, remote, src)
    mirroring = _Mirroring(kafka_a.bootstrap_servers, kafka_b.bootstrap_servers, topic, remote)
    mirroring.start()
    try:
        while mirroring.copied < 20:  # records flow on both sides before the job starts
            time.sleep(0.05)
        code, report = validate(spark, tmp_path, config(kafka_a, kafka_b, topic))
    finally:
        mirroring.stop.set()
        mirroring.join(30)
    [group] = report["groups"]
    assert code == 0 and report["passed"], (report["failures"], counts(group))
    assert group["after_snapshot"] > 0, counts(group)  # the job ran while records flowed
    assert group["source_records"] >= 1020 and group["matched"] == group["source_records"], counts(group)
    assert (group["missing"], group["extras"], group["duplicates"]) == (0, 0, 0), counts(group)
    assert group["target_records"] == group["matched"]  # those set aside are not counted here


def test_identity_aggregation_validates_two_sources_as_one_target_topic(spark, tmp_path, kafka_a, kafka_b, kafka_c):
    topic = "vj-agg-orders"
    sources = {}
    for alias, cluster in (("us", kafka_a), ("uk", kafka_c)):
        create_topic(cluster.bootstrap_servers, topic, partitions=PARTITIONS, replication_factor=1)
        produce_records(cluster.bootstrap_servers, topic, source_records(alias, 500))
        sources[alias] = read_all(cluster.bootstrap_servers, topic)
    create_topic(kafka_b.bootstrap_servers, topic, partitions=PARTITIONS, replication_factor=1)
    # both regions interleaved in each target partition, as MM2's two flows would write them
    merged = [m for pair in zip(sources["us"], sources["uk"]) for m in pair]
    copy_records(kafka_b.bootstrap_servers, topic, merged)

    flows = [{"name": f"{alias}->central", "source_bootstrap": cluster.bootstrap_servers,
              "target_bootstrap": kafka_b.bootstrap_servers, "source_alias": alias, "policy": "identity",
              "topics": [topic]} for alias, cluster in (("us", kafka_a), ("uk", kafka_c))]
    code, report = validate(spark, tmp_path, {"flows": flows, "wait_seconds": 60})
    assert code == 0 and report["passed"]
    [group] = report["groups"]  # one group: the same target topic
    assert group["flows"] == ["us->central", "uk->central"] and group["topic"] == topic
    assert counts(group) == exact(1000)
    assert group["partitions_ok"] and [s["partitions"] for s in group["sources"]] == [PARTITIONS, PARTITIONS]
    assert [(f["name"], f["topics"][0]["matched"]) for f in report["flows"]] == \
        [("us->central", 500), ("uk->central", 500)]

    # one uk record copied twice: the duplicate is uk's, not us's
    copy_records(kafka_b.bootstrap_servers, topic, [sources["uk"][42]])
    code, report = validate(spark, tmp_path, {"flows": flows, "wait_seconds": 60})
    assert code == 1 and report["groups"][0]["duplicates"] == 1
    assert [(f["name"], f["topics"][0]["duplicates"]) for f in report["flows"]] == \
        [("us->central", 0), ("uk->central", 1)]


def test_topic_patterns_pick_the_replicated_topics_in_both_offset_modes(spark, tmp_path, kafka_a, kafka_b):
    for name, count in (("vj-pat-a", 300), ("vj-pat-b", 200), ("vj-pat-skip", 50)):
        create_topic(kafka_a.bootstrap_servers, name, partitions=PARTITIONS, replication_factor=1)
        produce_records(kafka_a.bootstrap_servers, name, source_records(name, count))
        create_topic(kafka_b.bootstrap_servers, f"{ALIAS}.{name}", partitions=PARTITIONS, replication_factor=1)
        copy_records(kafka_b.bootstrap_servers, f"{ALIAS}.{name}", read_all(kafka_a.bootstrap_servers, name))
    create_topic(kafka_a.bootstrap_servers, "vj-pat-empty", partitions=PARTITIONS, replication_factor=1)
    flow = {**config(kafka_a, kafka_b, "unused")["flows"][0], "topics": None}
    patterned = {"flows": [{**flow, "topic_patterns": ["vj-pat-.*"], "topics_exclude": ["vj-pat-skip"]}],
                 "wait_seconds": 30}
    none_matched = {**patterned, "flows": [{**flow, "topic_patterns": ["vj-none-.*"]}]}
    *by_mode, nothing = validate_at_once(spark, tmp_path, (patterned, "--offsets-via", "kafka-client"),
                                         (patterned, "--offsets-via", "spark"), (none_matched,))
    for mode, (code, report) in zip(("kafka-client", "spark"), by_mode):  # topics listed by confluent_kafka,
        # or by Kafka's Admin in Spark's JVM
        assert code == 0 and report["offsets_via"] == mode
        assert [g["topic"] for g in report["groups"]] == [f"{ALIAS}.vj-pat-a", f"{ALIAS}.vj-pat-b"]
        assert [(t["topic"], t["matched"]) for t in report["flows"][0]["topics"]] == [("vj-pat-a", 300),
                                                                                      ("vj-pat-b", 200)]
    # nothing matched yet (a stack's first `up`): passed, nothing checked
    code, report = nothing
    assert code == 0 and report["groups"] == [] and report["flows"] == [{"name": "a->b", "topics": []}]


def _commit_group(bootstrap: str, topic: str, group: str, offsets: dict[int, int]) -> None:
    """Join `group` as a subscribed consumer and commit exactly `offsets`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < len(offsets) and time.monotonic() < deadline:
            consumer.poll(0.5)
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def _wait_for_checkpoints(bootstrap: str, topic: str, group: str, upstream: dict[int, int],
                          timeout: float = 180) -> dict[int, tuple[bytes, bytes]]:
    """Raw (key, value) of the first checkpoint of `group` per partition at the
    expected upstream offsets, read with confluent-kafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"vj-cp-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "topic.metadata.refresh.interval.ms": 1000})
    consumer.subscribe([topic])
    found: dict[int, tuple[bytes, bytes]] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(found) < len(upstream) and time.monotonic() < deadline:
            for m in consumer.consume(100, timeout=1.0):
                if m.error():
                    continue
                g, _t, p = decode_checkpoint_key(m.key())
                if g == group and decode_checkpoint_value(m.value())[0] == upstream.get(p):
                    found.setdefault(p, (m.key(), m.value()))
    finally:
        consumer.close()
    assert len(found) == len(upstream), f"checkpoints of {group} after {timeout}s: {found}"
    return found


def test_real_mm2_flow_with_checkpoints_passes_and_failover_loses_nothing(
        spark, tmp_path, kafka_a, kafka_b, connect_b):
    topic, group = "vj-mm2-orders", "vj-mm2-group"
    a, b = kafka_a.bootstrap_servers, kafka_b.bootstrap_servers
    create_topic(a, topic, partitions=PARTITIONS, replication_factor=2)
    produce_records(a, topic, source_records("mm2", 600))
    committed = {0: 120, 1: 170}
    _commit_group(a, topic, group, committed)
    assert committed_offsets(a, group, topic, PARTITIONS) == committed

    topology = load_topology({"clusters": {"vjsrc": {"brokers": 2}, "vjdst": {"brokers": 1}}, "flows": [{
        "source": "vjsrc", "target": "vjdst", "topics": [topic], "groups": [group], "heartbeats": False,
        "refresh_seconds": 2, "overrides": {"checkpoint": {"emit.checkpoints.interval.seconds": "1"}}}]})
    flow = topology.flows[0]
    connectors = mirror_connector_configs(flow.description(), replication_factor=1, source_bootstrap=a,
                                          target_bootstrap=b)
    props = {"flow": flow.name, "connect_url": connect_b.rest_url, "connectors": connectors,
             "timeout_seconds": "120", "restart_trigger": ""}
    provider = MirrorMaker2Provider()
    created = provider.create(props)
    try:
        remote, checkpoints = f"vjsrc.{topic}", "vjsrc.checkpoints.internal"
        raw = _wait_for_checkpoints(b, checkpoints, group, committed)
        # the real bytes: key Struct{group, topic (the REMOTE name), partition}; value version 0 + offsets
        for p, (key, value) in raw.items():
            assert decode_checkpoint_key(key) == (group, remote, p)
            assert value[:2] == b"\x00\x00"
            upstream, downstream, metadata = decode_checkpoint_value(value)
            assert upstream == committed[p] and 0 <= downstream <= upstream and metadata == ""
            assert (key, value) == encode_checkpoint(group, remote, p, upstream, downstream, metadata)
        # Spark's SQL decoding of the same records agrees with the byte-level decoder
        decoded = {(r["group"], r["topic"], r["partition"], r["upstream_offset"], r["downstream_offset"])
                   for r in checkpoints_frame(spark, b, {}, checkpoints).collect()}
        assert {(group, remote, p, *decode_checkpoint_value(v)[:2]) for p, (_k, v) in raw.items()} <= decoded

        # Given positions (as a failover drill hands its group copies' over): at the copy of the first record
        # the group has not read (found here independently, by identity), 3 before it, 2 past it
        assert len(consume(b, remote, 600, timeout=120)) >= 600
        at = copy_offsets(read_all(a, topic), read_all(b, remote), committed)
        assert all(at[p] >= 3 for p in committed), at

        def position(name: str, shift: int, on: str = topic) -> dict:
            return {"name": name, "consumer_group": group, "label": "drill t1", "partitions": [
                {"topic": on, "partition": p, "upstream_offset": u, "downstream_offset": at[p] + shift}
                for p, u in committed.items()]}

        cfg = {"flows": [{"name": flow.name, "source_bootstrap": a, "target_bootstrap": b,
                          "source_alias": "vjsrc", "policy": "default", "topics": [topic],
                          "checkpoints_topic": checkpoints, "groups": [group],
                          "positions": [position("copy-exact", 0), position("copy-early", -3),
                                        position("copy-late", 2), position("copy-elsewhere", 0, on="vj-none")]}],
               "wait_seconds": 120}
        code, report = validate(spark, tmp_path, cfg)
        [result] = report["groups"]
        assert result["topic"] == remote
        assert counts(result) == exact(600)
        [failover] = result["failover"]
        assert failover["consumer_group"] == group and failover["partitions"] == PARTITIONS
        assert failover["lost"] == 0 and failover["reread"] >= 0
        assert {c["partition"]: c["upstream_offset"] for c in failover["checkpoints"]} == committed
        proved = {e["name"]: (e["reread"], e["lost"]) for e in result["positions"]}
        assert proved == {"copy-exact": (0, 0), "copy-early": (3 * PARTITIONS, 0),
                          "copy-late": (0, 2 * PARTITIONS)}, result["positions"]
        # only the wrong positions fail the run, each named, and the one on a topic the run did not check
        assert code == 1 and len(report["failures"]) == 3, report["failures"]
        assert "copy-early (at the position of group vj-mm2-group, drill t1) would re-read 6 and lose 0" \
            in report["failures"][0] and "copy-late" in report["failures"][1], report["failures"]
        assert "position copy-elsewhere (of group vj-mm2-group) on vj-none was not proved" in report["failures"][2]
    finally:
        provider.delete(created.id, created.outs)


def copy_offsets(source: list[Msg], target: list[Msg], upstream: dict[int, int]) -> dict[int, int]:
    """Per partition: the target offset of the copy of the source record at `upstream` (its k-th copy for
    the k-th of its twins), by identity."""
    def ident(m: Msg):
        return m.key, m.value, m.headers, m.timestamp
    found = {}
    for p, u in upstream.items():
        [record] = [m for m in source if (m.partition, m.offset) == (p, u)]
        k = sum(1 for m in source if m.partition == p and m.offset < u and ident(m) == ident(record))
        copies = [m.offset for m in target if m.partition == p and ident(m) == ident(record)]
        found[p] = copies[k]
    return found


def _processes_with_env(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_cli_runs_standalone_and_stops_its_jvm(tmp_path, kafka_a, kafka_b):
    """The CLI runs, each its own process (and JVM) with its own marker in its
    environment, go at once: the standalone script on a clean copy, spark-submit
    on a copy with an extra, and two runs with bad input."""
    topic, remote, src = setup_pair(kafka_a, kafka_b, "cli", count=200)
    copy_records(kafka_b.bootstrap_servers, remote, src)
    cfg_file, out = tmp_path / "flows.json", tmp_path / "report.json"
    cfg_file.write_text(json.dumps(config(kafka_a, kafka_b, topic)))
    # spark-submit's copy: the same 200 records, and one written straight into the target
    # makes it fail: exit 1 through spark-submit
    sub_topic, sub_remote, sub_src = setup_pair(kafka_a, kafka_b, "cli-submit", count=200)
    copy_records(kafka_b.bootstrap_servers, sub_remote, sub_src)
    produce_records(kafka_b.bootstrap_servers, sub_remote,
                    [(0, b"intruder", b"intruder", (), int(time.time() * 1000))])
    sub_cfg_file = tmp_path / "submit-flows.json"
    sub_cfg_file.write_text(json.dumps(config(kafka_a, kafka_b, sub_topic)))
    markers = {run: f"vj-cli-{run}-{uuid.uuid4().hex}" for run in ("script", "submit", "bad")}
    # the standalone runs import mirrorstack.spark installed (make venv: this checkout); spark-submit from the zip
    env = {run: {**os.environ, "VALIDATION_TEST_MARKER": marker, "PYTHONPATH": "" if run == "submit" else str(PROJECT)}
           for run, marker in markers.items()}
    jars = ",".join(str(j) for j in toolchain.spark_kafka_jars())
    script = str(PROJECT / "spark" / "validate_replication.py")

    # spark-submit of the script shipped alone (no project beside it), the jars given to spark-submit
    # (its package elsewhere, a zip given to --py-files as every platform's launcher does)
    lone = tmp_path / "shipped" / "validate_replication.py"
    lone.parent.mkdir()
    shutil.copy(script, lone)
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / ZIP_NAME).write_bytes(job_zip())
    py_files = [str(modules / ZIP_NAME)]
    submit_out = tmp_path / "submit-report.json"

    def standalone():
        run = subprocess.run([sys.executable, script, "--jars", jars, "--config", str(cfg_file), "--out", str(out)],
                             cwd=tmp_path, env=env["script"], capture_output=True, text=True, timeout=600)
        return run, _processes_with_env(markers["script"])  # looked for as soon as the run ended

    def submitted():
        run = subprocess.run(
            [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]",
             "--jars", jars, "--py-files", ",".join(py_files),
             "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
             "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.sql.shuffle.partitions=2",
             str(lone), "--config", str(sub_cfg_file), "--out", str(submit_out)],
            cwd=lone.parent,
            env={**env["submit"], "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable},
            capture_output=True, text=True, timeout=600)
        return run, _processes_with_env(markers["submit"])

    def bad_input():
        # a missing source topic is found before Spark starts
        bad = dict(config(kafka_a, kafka_b, "vj-no-such-topic"))
        missing = subprocess.run([sys.executable, script, "--config-json", json.dumps(bad)], env=env["bad"],
                                 capture_output=True, text=True, timeout=120)
        fields = subprocess.run([sys.executable, script, "--config-json", '{"flows": [{"policy": "mirror"}]}'],
                                env={**os.environ, "PYTHONPATH": str(PROJECT)}, capture_output=True, text=True,
                                timeout=60)
        return missing, fields, _processes_with_env(markers["bad"])

    with ThreadPoolExecutor(3) as pool:
        runs = pool.submit(standalone), pool.submit(submitted), pool.submit(bad_input)
    (run, left), (submit_run, submit_left), (missing, fields, bad_left) = (f.result() for f in runs)

    assert run.returncode == 0, run.stderr[-3000:]
    assert "replication check PASSED" in run.stdout
    report = json.loads(out.read_text())
    assert counts(report["groups"][0]) == exact(200)
    assert left == []  # Spark's JVM exited with the job

    run = submit_run
    assert run.returncode == 1, run.stderr[-3000:]
    assert "replication check FAILED" in run.stdout
    report = json.loads(submit_out.read_text())
    assert counts(report["groups"][0]) == exact(200, target_records=201, extras=1)
    assert report["failures"] == [f"{sub_remote} on {kafka_b.bootstrap_servers}: extras 1 > tolerance 0"]
    assert submit_left == []

    # bad input: exit 2, naming the field
    run = missing
    assert run.returncode == 2
    assert "flows[0].topics[0]: topic 'vj-no-such-topic' does not exist" in run.stderr
    run = fields
    assert run.returncode == 2 and "flows[0].policy" in run.stderr and "flows[0].source_bootstrap" in run.stderr
    assert bad_left == []
    assert all(_processes_with_env(marker) == [] for marker in markers.values())


def assert_reported_as_local(run: subprocess.CompletedProcess, report: dict, local: tuple[int, dict],
                             gone: list[Msg]) -> None:
    """A run elsewhere reported what local[2] did on a 400-record copy missing `gone`."""
    local_code, local_report = local
    assert local_code == 1 and counts(local_report["groups"][0]) == exact(
        400, target_records=400 - len(gone), matched=400 - len(gone), missing=len(gone))
    assert run.returncode == 1, run.stderr[-3000:]
    assert [counts(g) for g in report["groups"]] == [counts(g) for g in local_report["groups"]]
    assert report["failures"] == local_report["failures"]
    assert {(s["partition"], s["source_offset"]) for s in report["groups"][0]["samples"]["missing"]} == \
        {(m.partition, m.offset) for m in gone}


def test_a_standalone_cluster_reports_what_local_does_and_an_executor_no_worker_fits_fails_in_time(
        spark, tmp_path, kafka_a, kafka_b):
    """The job on a real standalone cluster (a master and two workers from PySpark's own jars): the
    same counts as local[2] on the same copy, 3 records deleted from it; its executors ran on both
    workers. An executor bigger than any worker fails the run within its bound, naming the field,
    and leaves neither the driver nor the application running."""
    cluster = StandaloneCluster(tmp_path / "spark-cluster", workers=2, cores=1, memory="1g").start()
    try:
        topic, remote, src = setup_pair(kafka_a, kafka_b, "standalone", count=400)
        gone = middle(src, 3, step=97)
        copy_records(kafka_b.bootstrap_servers, remote, [m for m in src if m not in gone])
        cfg = json.dumps(config(kafka_a, kafka_b, topic, wait_seconds=3))
        package = tmp_path / ZIP_NAME
        package.write_bytes(job_zip())
        jars = ",".join(str(j) for j in toolchain.spark_kafka_jars())
        markers = {run: f"vj-standalone-{run}-{uuid.uuid4().hex}" for run in ("fits", "too-big")}

        def on_cluster(run: str, *flags: str):
            out = tmp_path / f"{run}-report.json"
            done = subprocess.run(
                [sys.executable, str(PROJECT / "spark" / "validate_replication.py"), "--master", cluster.master_url,
                 "--jars", jars, "--py-files", str(package), "--config-json", cfg, "--out", str(out),
                 "--poll-seconds", "1", *flags],
                env={**os.environ, "VALIDATION_TEST_MARKER": markers[run], "PYTHONPATH": str(PROJECT)},
                capture_output=True, text=True, timeout=600)
            return done, (json.loads(out.read_text()) if out.is_file() else None), _processes_with_env(markers[run])

        with ThreadPoolExecutor(2) as pool:
            fits = pool.submit(on_cluster, "fits", "--executor-memory", "512m", "--executor-cores", "1")
            too_big = pool.submit(on_cluster, "too-big", "--executor-memory", "4g", "--executor-wait-seconds", "5")
            local_code, local_report = validate(spark, tmp_path, json.loads(cfg))
        (run, report, left), (big, big_report, big_left) = fits.result(), too_big.result()

        assert_reported_as_local(run, report, (local_code, local_report), gone)
        app_ids = {app["id"] for app in cluster.applications()}
        # each worker launched an executor of the application that ran the job (its work folder)
        ran_on = [{p.name for p in (tmp_path / "spark-cluster" / f"worker-{i}").iterdir()} & app_ids for i in (0, 1)]
        assert all(len(apps) == 1 for apps in ran_on) and ran_on[0] == ran_on[1], ran_on
        assert left == []

        assert big.returncode == 3 and big_report["exit_code"] == 3, big.stderr[-3000:]
        said = big_report["error"]
        assert f"no executor of {cluster.master_url} started within 5 s" in said and said in big.stderr, said
        assert "spark.executor.memory=4g" in said and "validation.executor_memory" in said
        assert big_left == []  # the driver's JVM stopped with the job
        assert [app for app in requests.get(f"{cluster.ui_url}/json/", timeout=5).json()["activeapps"]] == []

        # The continuous validator on the same cluster: its ledgers in its executors' state stores.
        watched = watch_on(cluster.master_url, tmp_path / "watch", kafka_a, kafka_b, topic, remote,
                           "--executor-memory", "512m")
        assert (watched["confirmed_records_total"], watched["duplicates_records_total"]) == (len(src) - 3, 0)
        (validator_app,) = {app["id"] for app in cluster.applications()} - app_ids
        assert all((tmp_path / "spark-cluster" / f"worker-{i}" / validator_app).is_dir() for i in (0, 1))
        assert [app for app in requests.get(f"{cluster.ui_url}/json/", timeout=5).json()["activeapps"]] == []
    finally:
        cluster.stop()


def test_a_spark_connect_server_reports_what_local_does_and_its_bad_inputs_are_named(
        spark, tmp_path, kafka_a, kafka_b):
    """The job through a real Spark Connect server (PySpark's own jars, spark-sql-kafka on its
    classpath): its DataFrame code runs on the server, so the job's process needs no Java, and the
    counts equal local[2]'s on the same copy, 3 records deleted from it. A server without the Kafka
    data source, an address where nothing answers, executor sizes and offsets through Spark each fail
    naming the field and the fix, and leave nothing of the job running."""
    servers = [ConnectServer(tmp_path / "connect", jars=toolchain.spark_kafka_jars()),
               ConnectServer(tmp_path / "connect-bare", memory="512m")]
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(ConnectServer.start, servers))
    try:
        topic, remote, src = setup_pair(kafka_a, kafka_b, "connect", count=400)
        gone = middle(src, 3, step=97)
        copy_records(kafka_b.bootstrap_servers, remote, [m for m in src if m not in gone])
        # the report also as a record on the target, the channel the control plane reads wherever the job ran
        reports = f"vj-reports-{uuid.uuid4().hex[:8]}"
        cfg = json.dumps(config(kafka_a, kafka_b, topic, wait_seconds=3,
                                report_to={"bootstrap": kafka_b.bootstrap_servers, "topic": reports}))
        (silent_port,) = free_ports(1)
        markers: dict[str, str] = {}

        def through(run: str, master: str, *flags: str):
            out, markers[run] = tmp_path / f"{run}-report.json", f"vj-connect-{run}-{uuid.uuid4().hex}"
            done = subprocess.run(
                [sys.executable, str(PROJECT / "spark" / "validate_replication.py"), "--master", master,
                 "--config-json", cfg, "--out", str(out), "--poll-seconds", "1", "--report-key", run, *flags],
                # no Java for this process: a JVM started here instead of on the server fails the run
                env={**os.environ, "VALIDATION_TEST_MARKER": markers[run], "JAVA_HOME": "/nonexistent/java"},
                capture_output=True, text=True, timeout=300)
            return done, (json.loads(out.read_text()) if out.is_file() else None)

        with ThreadPoolExecutor(3) as pool:
            runs = {run: pool.submit(through, run, *how) for run, how in {
                "connect": (servers[0].url,), "bare": (servers[1].url,),
                "silent": (f"sc://127.0.0.1:{silent_port}",),
                "sized": (servers[0].url, "--executor-memory", "2g"),
                "jvm-offsets": (servers[0].url, "--offsets-via", "spark")}.items()}
            local_code, local_report = validate(spark, tmp_path, json.loads(cfg))
        (run, report), (bare, bare_report), (silent, silent_report), (sized, _), (jvm, _) = (
            runs[r].result() for r in ("connect", "bare", "silent", "sized", "jvm-offsets"))

        assert_reported_as_local(run, report, (local_code, local_report), gone)

        assert bare.returncode == 3, bare.stderr[-3000:]
        said = bare_report["error"]
        assert f"the Spark Connect server at {servers[1].url} (validation.master) has no Kafka data source" in said
        assert "fix: start it with --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4." in said, said
        assert silent.returncode == 3 and f"nothing answers at 127.0.0.1:{silent_port}" in silent_report["error"]
        assert "fix: start it, or correct validation.master" in silent_report["error"]
        assert sized.returncode == 2 and "--executor-memory: a Spark Connect server" in sized.stderr, sized.stderr
        assert jvm.returncode == 2 and "over Spark Connect the job reads offsets here" in jvm.stderr, jvm.stderr
        assert all(_processes_with_env(marker) == [] for marker in markers.values())
        assert all(server.handle is not None and launcher.is_alive(server.handle) for server in servers)
        # on the topic: the reports written through the server's Kafka sink and the local session's (under a
        # key of its own), and the errors of the runs that could not run (no session: through confluent_kafka);
        # bad input sends nothing
        sent = {r.key.decode(): json.loads(r.value) for r in consume(kafka_b.bootstrap_servers, reports, expected=4)}
        assert {key: sent.pop(key, None) for key in ("connect", "bare", "silent")} == {
            "connect": report, "bare": bare_report, "silent": silent_report}
        assert list(sent.values()) == [local_report]

        # The continuous validator through the server: its ledgers there, its figures read back from it.
        watched = watch_on(servers[0].url, tmp_path / "watch", kafka_a, kafka_b, topic, remote,
                           env={"JAVA_HOME": "/nonexistent/java"})
        assert (watched["confirmed_records_total"], watched["duplicates_records_total"]) == (len(src) - 3, 0)
    finally:
        for server in servers:
            server.stop()


def watch_on(master: str, folder: Path, kafka_a, kafka_b, topic: str, remote: str, *more: str,
             env: dict[str, str] | None = None) -> dict[str, float]:
    """The continuous validator on `master` over a pair whose copy lacks 3 records (read from two hours
    back, both sides): its figures once the 3 count missing; it stops on TERM with exit 0."""
    folder.mkdir()
    validator = StreamingValidator(folder, config(kafka_a, kafka_b, topic), remote, window=5, trigger=1,
                                   master=master, more=("--lookback-seconds", "7200", *more), env=env)
    validator.start()
    try:
        figures = validator.until("3 records missing", lambda f: f["missing_records_total"] == 3, timeout=300)
    finally:
        code = validator.stop()
    assert code == 0, validator.said()[-3000:]
    return figures


def test_up_takes_the_report_from_its_topic_and_fails_in_time_when_none_comes(tmp_path, kafka_b, monkeypatch):
    """The local platform's job resource reads the report the job sent to its topic (as it would from a
    job that ran elsewhere), not the job's --out file; a job that ends without sending one fails the
    run within the bound, naming where the job ran and the topic. Stand-in job files: the provider's
    channel, not Spark, is under test."""
    monkeypatch.setattr(spark_job, "REPORT_WAIT_SECONDS", 3)
    reports = f"vj-reports-{uuid.uuid4().hex[:8]}"
    report_to = {"bootstrap": kafka_b.bootstrap_servers, "topic": reports}
    on_topic = {**PASSED, "records_checked": 7, "flows": [{"name": "a->b", "topics": []}]}
    job = tmp_path / "job.py"
    job.write_text(
        "import json, sys\nfrom confluent_kafka import Producer\n"
        "arg = lambda name: sys.argv[sys.argv.index(name) + 1]\n"
        f"json.dump({FAILED_FILE!r}, open(arg('--out'), 'w'))  # what --out says is not what up reports\n"
        "if 'send' in sys.argv[0]:\n"
        f"    producer = Producer({{'bootstrap.servers': {kafka_b.bootstrap_servers!r}}})\n"
        f"    producer.produce({reports!r}, key=arg('--report-key').encode(), value=json.dumps({on_topic!r}).encode())\n"
        "    assert producer.flush(30) == 0\n")
    sending = tmp_path / "send_job.py"
    sending.write_text(job.read_text())
    provider = LocalSparkJobProvider(JOB_OUTPUT, job_zip, ZIP_NAME)

    def props(job_file: Path, name: str) -> dict:
        return {"name": name, "job_file": str(job_file), "job_sha256": "x", "workdir": str(tmp_path / name),
                "config": {"flows": [{"name": "a->b"}], "report_to": report_to}, "jars": "",
                "python": sys.executable, "report_only": "false", "run_id": "", "driver_memory": "1g",
                "master": "spark://spark-master.example.com:7077", "timeout_seconds": "60"}

    outs = provider.create(props(sending, "sends")).outs
    assert (outs["passed"], outs["report"]["records_checked"]) == (True, 7)
    started = time.monotonic()
    with pytest.raises(RuntimeError) as silent:
        provider.create(props(job, "silent"))
    assert time.monotonic() - started < 30
    assert (f"silent: the validation job on spark://spark-master.example.com:7077 ended (exit 0) without a report on "
            f"topic {reports} at {kafka_b.bootstrap_servers} within 3s") in str(silent.value)


def test_a_handed_out_job_is_taken_once_it_reports_and_fails_up_when_it_never_does(tmp_path, kafka_b):
    """validation.submit: yourself, at its provider: the files and the spark-submit line handed out; an `up`
    before the report came changes nothing; the report sent under the handed-out key is taken by the next;
    one past the bound with no report fails, naming the command and the topic."""
    reports = f"vj-reports-{uuid.uuid4().hex[:8]}"
    provider = HandedOutJobProvider(JOB_OUTPUT, job_zip, ZIP_NAME, handed_out_argv)

    def handed_out(name: str, within: float) -> dict:
        return provider.create({
            "name": name, "job_file": str(PROJECT / "spark" / "validate_replication.py"), "job_sha256": "x",
            "config": {"flows": [{"name": "a->b"}], "report_to": {"bootstrap": kafka_b.bootstrap_servers,
                                                                   "topic": reports}},
            "workdir": str(tmp_path / name), "run_id": "", "report_only": "false",
            "report_within_seconds": str(within), "spark_version": "4.2.0"}).outs

    outs = handed_out("taken", 600)
    submit = outs["submit"]
    assert (outs["report"]["status"], submit["report_topic"]) == ("awaiting-report", reports)
    assert shlex.split(submit["command"]) == [
        "spark-submit", "--packages", "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0", "--py-files", ZIP_NAME,
        "validate_replication.py", "--config", "flows.json", "--report-key", submit["report_key"]]
    folder = Path(submit["directory"])
    assert (folder / ZIP_NAME).read_bytes() == job_zip() and (folder / "validate_replication.py").is_file()
    assert (folder / "flows.json").stat().st_mode & 0o777 == 0o600
    assert provider.diff("taken", outs, outs).changes is False  # nothing came yet: nothing to do
    producer = Producer({"bootstrap.servers": kafka_b.bootstrap_servers})
    producer.produce(reports, key=submit["report_key"].encode(), value=json.dumps(
        {**PASSED, "records_checked": 5, "flows": [{"name": "a->b", "topics": []}]}).encode())
    assert producer.flush(30) == 0
    assert provider.diff("taken", outs, outs).changes is True
    taken = provider.update("taken", outs, outs).outs
    assert (taken["report"]["status"], taken["report"]["records_checked"], taken["report"]["submit"]) == (
        "passed", 5, submit)
    assert provider.diff("taken", taken, taken).changes is False

    late = handed_out("late", 2)
    deadline = time.monotonic() + 30
    while not provider.diff("late", late, late).changes:
        assert time.monotonic() < deadline
    with pytest.raises(RuntimeError) as silent:
        provider.update("late", late, late)
    said = str(silent.value)
    assert f"has not reported to topic {reports} at {kafka_b.bootstrap_servers} within 2s" in said
    assert f"fix: submit it (from {late['submit']['directory']}: {late['submit']['command']})" in said


PASSED = {"status": "passed", "passed": True, "failures": [], "duration_seconds": 1.0, "groups": []}
FAILED_FILE = {**PASSED, "status": "failed", "passed": False, "failures": ["from the file"], "flows": []}


def test_a_window_reads_only_recent_records_and_nothing_selected_is_no_pass(spark, tmp_path, kafka_a, kafka_b):
    """A topic with two days of history: with a one-hour window the job reads
    from each partition's first offset in the window (on both sides) and checks
    only those records; a window holding nothing reports `nothing-checked`."""
    topic, remote = "vj-window", f"{ALIAS}.vj-window"
    create_topic(kafka_a.bootstrap_servers, topic, partitions=PARTITIONS, replication_factor=1)
    create_topic(kafka_b.bootstrap_servers, remote, partitions=PARTITIONS, replication_factor=1)
    now = int(time.time() * 1000)
    old = [(i % PARTITIONS, f"old-{i}".encode(), b"v", (), now - 2 * 86_400_000 + i) for i in range(60)]
    recent = [(i % PARTITIONS, f"new-{i}".encode(), b"v", (), now - 600_000 + i) for i in range(40)]
    produce_records(kafka_a.bootstrap_servers, topic, old + recent)
    copy_records(kafka_b.bootstrap_servers, remote, read_all(kafka_a.bootstrap_servers, topic))
    # written straight into the target, two days old: outside the window, so not an extra there
    produce_records(kafka_b.bootstrap_servers, remote, [(0, b"intruder", b"x", (), now - 2 * 86_400_000 + 100)])

    vias = ("kafka-client", "spark")
    runs = validate_at_once(
        spark, tmp_path,
        *((config(kafka_a, kafka_b, topic, window_seconds=3600), "--offsets-via", via) for via in vias),
        (config(kafka_a, kafka_b, topic),),
        *((config(kafka_a, kafka_b, topic, window_seconds=60), "--offsets-via", via) for via in vias),
        (config(kafka_a, kafka_b, topic, window_seconds=60, min_records=1),))
    for via, (code, report) in zip(vias, runs[0:2]):
        assert (code, report["status"], report["passed"]) == (0, "passed", True), report["failures"]
        [group] = report["groups"]
        assert counts(group) == exact(40)  # read and matched: the 40 recent records only
        # each partition was read from its first record in the window: after its 30 old records
        assert group["sources"][0]["window"] == {"0": [30, 50], "1": [30, 50]}
        assert report["records_checked"] == 40 and report["topics_checked"] == 1
        assert report["window"]["seconds"] == 3600 and now - 3_700_000 < report["window"]["since_ms"] < now

    # whole history (no window): all 100 records, and the old intruder is an extra
    code, report = runs[2]
    assert code == 1 and counts(report["groups"][0]) == exact(100, target_records=101, extras=1)
    assert report["window"]["seconds"] is None and report["records_checked"] == 100

    # a window with no record in it: nothing checked, reported as such; min_records makes it fail
    for via, (code, report) in zip(vias, runs[3:5]):  # (partition counts from the Admin client, not from
        # records read)
        assert (code, report["status"], report["passed"], report["records_checked"]) == \
            (0, "nothing-checked", False, 0), report["failures"]
        assert report["groups"][0]["partitions_ok"] and report["groups"][0]["target_partitions"] == PARTITIONS
    code, report = runs[5]
    assert (code, report["status"]) == (1, "failed")
    assert report["failures"] == ["checked 0 records, fewer than min_records 1"]


def _connector_state(rest_url: str, name: str) -> tuple[str, list[str]]:
    status = requests.get(f"{rest_url}/connectors/{quote(name, safe='')}/status", timeout=10).json()
    return status["connector"]["state"], [t["state"] for t in status.get("tasks", [])]


FETCH_SETTLE_SECONDS = 3  # > the source consumer's fetch.max.wait.ms (500 ms, Kafka's default)


def _set_connector(rest_url: str, name: str, action: str, state: str) -> None:
    """PUT /connectors/{name}/pause|resume, then wait until it and its tasks are in `state`."""
    requests.put(f"{rest_url}/connectors/{quote(name, safe='')}/{action}", timeout=10).raise_for_status()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        connector, tasks = _connector_state(rest_url, name)
        if connector == state and tasks and all(t == state for t in tasks):
            return
        time.sleep(0.5)
    raise AssertionError(f"{name} not {state} after 60s: {_connector_state(rest_url, name)}")


def _produce_at(bootstrap: str, topic: str, partition: int, count: int, prefix: str, timestamp: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=f"{prefix}-{i}".encode(), value=f"{prefix}-v{i}".encode(),
                         partition=partition, timestamp=timestamp + i)
    assert producer.flush(30) == 0


def _wait_for_end(bootstrap: str, topic: str, ends: dict[int, int], timeout: float = 120) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"vj-ends-{uuid.uuid4().hex}"})
    deadline = time.monotonic() + timeout
    try:
        while True:
            now = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                   for p in ends}
            if now == ends or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        consumer.close()
    assert now == ends, f"{topic} end offsets {now}, expected {ends}"


def test_records_purged_at_the_source_while_the_flow_is_paused_are_reported_exactly(
        spark, tmp_path, kafka_a, kafka_b, connect_b):
    """A real MM2 flow is paused; 25 records produced meanwhile to partition 0
    are deleted at the source (delete-records, as retention would) before MM2
    copies them. Paused, the job sees them as `purged` (the next offset to copy
    is behind the log start); resumed (MM2 resets to the log start), the gap
    shows in the offset syncs: 25 either way, per partition, and the run fails
    unless tolerance.purged allows it."""
    topic = "vj-purge-orders"
    a, b = kafka_a.bootstrap_servers, kafka_b.bootstrap_servers
    create_topic(a, topic, partitions=PARTITIONS, replication_factor=2)
    now = int(time.time() * 1000)
    # copied before the pause; partition 0's are older than the job's window, so its deleted
    # copies on the target are out of the window (not extras)
    _produce_at(a, topic, 0, 30, "old", now - 2 * 3_600_000)
    _produce_at(a, topic, 1, 30, "p1", now - 60_000)

    topology = load_topology({"clusters": {"vjpsrc": {"brokers": 2}, "vjpdst": {"brokers": 1}}, "flows": [{
        "source": "vjpsrc", "target": "vjpdst", "topics": [topic], "heartbeats": False}]})
    flow = topology.flows[0]
    connectors = {name: cfg for name, cfg in mirror_connector_configs(
        flow.description(), replication_factor=1, source_bootstrap=a, target_bootstrap=b).items()
        if cfg["connector.class"].endswith("MirrorSourceConnector")}
    [source_connector] = connectors
    provider = MirrorMaker2Provider()
    created = provider.create({"flow": flow.name, "connect_url": connect_b.rest_url, "connectors": connectors,
                               "timeout_seconds": "120", "restart_trigger": ""})
    try:
        remote = f"vjpsrc.{topic}"
        syncs_topic = flow.description().offset_syncs_topic()
        _wait_for_end(b, remote, {0: 30, 1: 30})
        _set_connector(connect_b.rest_url, source_connector, "pause", "PAUSED")
        # The paused task's consumer may still have a fetch at the broker (sent at its last
        # poll, held up to fetch.max.wait.ms = 500 ms): records arriving now would reach
        # MM2 in that fetch's answer and be copied after the resume even though deleted.
        time.sleep(FETCH_SETTLE_SECONDS)
        _produce_at(a, topic, 0, 25, "purged", now - 30_000)
        # delete-records up to the end: the log start moves past what MM2 has not copied
        source_admin = AdminClient({"bootstrap.servers": a})  # kept: its futures need it alive
        deleted = source_admin.delete_records([TopicPartition(topic, 0, 55)], request_timeout=30)
        assert [f.result(60).low_watermark for f in deleted.values()] == [55]
        _wait_for_end(b, remote, {0: 30, 1: 30}, timeout=1)  # paused: nothing more was copied

        cfg = {"flows": [{"name": flow.name, "source_bootstrap": a, "target_bootstrap": b,
                          "source_alias": "vjpsrc", "policy": "default", "topics": [topic],
                          "offset_syncs_topic": syncs_topic}],
               "wait_seconds": 60, "window_seconds": 3600}
        code, report = validate(spark, tmp_path, cfg)
        [group] = report["groups"]
        assert (code, group["purged"], group["missing"], group["extras"]) == (1, 25, 0, 0), report["failures"]
        assert group["purged_partitions"] == [{"flow": flow.name, "topic": topic, "partition": 0, "purged": 25,
                                               "pending": 25, "log_start": 55}]
        assert f"{remote} on {b}: purged 25 > tolerance 0" in report["failures"]

        _set_connector(connect_b.rest_url, source_connector, "resume", "RUNNING")
        _produce_at(a, topic, 0, 10, "new", now)
        _wait_for_end(b, remote, {0: 40, 1: 30})
        code, report = validate(spark, tmp_path, cfg)
        [group] = report["groups"]
        assert counts(group) == exact(40), report["failures"]
        assert group["purged_partitions"] == [{"flow": flow.name, "topic": topic, "partition": 0, "purged": 25,
                                               "pending": 0, "log_start": 55}]
        assert code == 1 and report["failures"] == [f"{remote} on {b}: purged 25 > tolerance 0"]
        assert report["flows"][0]["topics"][0]["purged"] == 25
        code, report = validate(spark, tmp_path, {**cfg, "tolerance": {"purged": 25}})
        assert (code, report["status"], report["groups"][0]["purged"]) == (0, "passed", 25), report["failures"]
    finally:
        provider.delete(created.id, created.outs)
