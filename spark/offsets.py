"""Offsets, partition counts and topic sizes read on the driver: through
confluent_kafka when the client settings translate to librdkafka
(`--offsets-via kafka-client`), else through Spark (`--offsets-via spark`:
the Kafka Admin client on the driver's classpath, aggregates over reads)."""
from __future__ import annotations

import json
import uuid
from typing import Any

from mirrorstack.mm2.client_settings import librdkafka_config
from mirrorstack.mm2.kafka_answers import asked_again

from .config import Config, normalize_bootstrap
from .spark_io import read_whole_topic


class KafkaClientOffsets:
    """Partition counts and watermarks through confluent_kafka (offsets only)."""

    def __init__(self):
        self._consumers: dict[str, Any] = {}

    @staticmethod
    def usable(config: Config) -> bool:
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            return False
        clients = [(f.source_bootstrap, f.source_client) for f in config.flows] + \
                  [(f.target_bootstrap, f.target_client) for f in config.flows]
        return all(librdkafka_config(b, c) is not None for b, c in clients)

    def _consumer(self, bootstrap: str, client: dict[str, str]):
        from confluent_kafka import Consumer
        key = json.dumps([normalize_bootstrap(bootstrap), client], sort_keys=True)
        if key not in self._consumers:
            conf = librdkafka_config(bootstrap, client)
            conf.update({"group.id": f"mirrorstack-validate-{uuid.uuid4().hex}", "enable.auto.commit": False,
                         "allow.auto.create.topics": False,
                         "log_level": 2})  # connection retries are reported once, as our error
            self._consumers[key] = Consumer(conf)
        return self._consumers[key]

    def watermarks(self, bootstrap: str, client: dict[str, str], topic: str) -> dict[int, tuple[int, int]] | None:
        """{partition: (low, high)}, or None when the topic does not exist."""
        from confluent_kafka import KafkaError, KafkaException, TopicPartition
        consumer = self._consumer(bootstrap, client)
        try:
            meta = consumer.list_topics(topic, timeout=15)
        except KafkaException as exc:
            raise RuntimeError(f"cannot reach Kafka at {bootstrap}: {exc}") from exc
        info = meta.topics.get(topic)
        if info is None or (info.error is not None and info.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            return None
        if info.error is not None:
            raise RuntimeError(f"metadata of {topic} at {bootstrap}: {info.error}")
        def ask(p: int):
            return consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15, cached=False)
        return {p: asked_again(lambda p=p: ask(p), lambda: consumer.list_topics(topic, timeout=15))  # leader now
                for p in sorted(info.partitions)}

    def offsets_for_time(self, bootstrap: str, client: dict[str, str], topic: str, partitions,
                         since_ms: int) -> dict[int, int | None]:
        """{partition: first offset whose timestamp is >= since_ms}, None where
        no record is that recent (Kafka's offsetsForTimes, from the time index)."""
        from confluent_kafka import TopicPartition
        asked = [TopicPartition(topic, p, since_ms) for p in sorted(partitions)]
        found = self._consumer(bootstrap, client).offsets_for_times(asked, timeout=15)
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in found}

    def topic_sizes(self, bootstrap: str, client: dict[str, str]) -> dict[str, int]:
        """{topic: records held now} of every topic at `bootstrap`."""
        from confluent_kafka import KafkaException
        try:
            names = sorted(self._consumer(bootstrap, client).list_topics(timeout=15).topics)
        except KafkaException as exc:
            raise RuntimeError(f"cannot reach Kafka at {bootstrap}: {exc}") from exc
        sizes = {}
        for name in names:
            marks = self.watermarks(bootstrap, client, name) or {}
            sizes[name] = sum(high - low for low, high in marks.values())
        return sizes

    def close(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()
        self._consumers.clear()


def jvm_topic_sizes(spark, bootstrap: str, client: dict[str, str]) -> dict[str, int]:
    """--offsets-via spark: {topic: records held now} through the Kafka Admin
    client that spark-sql-kafka brings onto the driver's classpath."""
    jvm = spark._jvm
    props = jvm.java.util.Properties()
    props.put("bootstrap.servers", bootstrap)
    props.put("default.api.timeout.ms", "30000")
    for key, value in client.items():
        props.put(key, value)
    admin = jvm.org.apache.kafka.clients.admin.Admin.create(props)
    try:
        names = admin.listTopics().names().get()
        described = admin.describeTopics(names).allTopicNames().get()
        spec = jvm.org.apache.kafka.clients.admin.OffsetSpec
        ends = {}
        for which in ("earliest", "latest"):
            request = jvm.java.util.HashMap()
            for name in names:
                for info in described.get(name).partitions():
                    request.put(jvm.org.apache.kafka.common.TopicPartition(name, info.partition()),
                                getattr(spec, which)())
            result = admin.listOffsets(request).all().get()
            ends[which] = {(tp.topic(), tp.partition()): result.get(tp).offset() for tp in result.keySet()}
        sizes = dict.fromkeys(names, 0)
        for (topic, partition), high in ends["latest"].items():
            sizes[topic] += high - ends["earliest"][(topic, partition)]
        return sizes
    finally:
        admin.close()


def jvm_list_offsets(spark, bootstrap: str, client: dict[str, str], topic: str, which: str,
                     since_ms: int | None = None) -> dict[int, int] | None:
    """--offsets-via spark: {partition: offset} of every partition of `topic`
    through the Kafka Admin client (no record read): `which` is "earliest",
    "latest" or "time" (the first offset whose timestamp is >= since_ms, the
    end offset where no record is that recent). None: no such topic."""
    jvm = spark._jvm
    admin_pkg = jvm.org.apache.kafka.clients.admin
    props = jvm.java.util.Properties()
    props.put("bootstrap.servers", bootstrap)
    props.put("default.api.timeout.ms", "30000")
    for key, value in client.items():
        props.put(key, value)
    admin = admin_pkg.Admin.create(props)

    def ask(partitions, spec) -> dict[int, int]:
        request = jvm.java.util.HashMap()
        for p in partitions:
            request.put(jvm.org.apache.kafka.common.TopicPartition(topic, p), spec)
        result = admin.listOffsets(request).all().get()
        return {tp.partition(): result.get(tp).offset() for tp in result.keySet()}
    try:
        if topic not in set(admin.listTopics().names().get()):
            return None
        info = admin.describeTopics(jvm.java.util.Collections.singleton(topic)).allTopicNames().get().get(topic)
        partitions = [p.partition() for p in info.partitions()]
        if which != "time":
            return ask(partitions, getattr(admin_pkg.OffsetSpec, which)())
        found = ask(partitions, admin_pkg.OffsetSpec.forTimestamp(since_ms))
        empty = [p for p, offset in found.items() if offset < 0]
        if empty:  # no record that recent: the window starts (and ends) at the end offset
            found.update(ask(empty, admin_pkg.OffsetSpec.latest()))
        return found
    finally:
        admin.close()


def spark_partition_stats(spark, bootstrap: str, client: dict[str, str], topic: str) -> dict[int, tuple[int, int]]:
    """--offsets-via spark: {partition: (min offset, max offset + 1)} of the
    partitions holding records (only these aggregates reach the driver)."""
    from pyspark.sql import functions as F
    rows = (read_whole_topic(spark, bootstrap, client, topic, headers=False)
            .groupBy("partition").agg(F.min("offset").alias("lo"), F.max("offset").alias("hi")).collect())
    return {int(r["partition"]): (int(r["lo"]), int(r["hi"]) + 1) for r in rows}
