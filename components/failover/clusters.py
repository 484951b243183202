"""One cluster of a failover pair as the switch reads and writes it
(confluent_kafka): its partitions and watermarks, the records at a group's
position and their copies, the groups' offsets, MM2's checkpoints and offset
syncs; and the source connector's offsets (Connect's REST API). No decision
here: those are rules.py's, and the order procedure.py's."""
from __future__ import annotations

import time
import uuid

from mirrorstack.failover import rules
from mirrorstack.mm2.flows import FlowDescription
from mirrorstack.mm2.kafka_answers import asked_again
from mirrorstack.mm2.records import decode_checkpoint_key, decode_checkpoint_value, decode_offset_sync
from mirrorstack.plan.live_topics import librdkafka_settings

KAFKA_TIMEOUT = 15  # seconds per Kafka request


class Cluster:
    """One cluster's reads and writes for the switch, through confluent_kafka."""

    def __init__(self, alias: str, settings: dict, timeout: float = KAFKA_TIMEOUT):
        self.alias = alias
        self.timeout = timeout
        conf, why_not = librdkafka_settings(settings["bootstrap"], settings.get("client") or {})
        if conf is None:
            raise RuntimeError(f"{alias}: {why_not}")
        self.conf = {**conf, "log_level": 0, "socket.connection.setup.timeout.ms": int(timeout * 1000)}
        self._admin = self._consumer = None

    def admin(self):
        from confluent_kafka.admin import AdminClient
        self._admin = self._admin or AdminClient(self.conf)
        return self._admin

    def consumer(self):
        from confluent_kafka import Consumer
        if self._consumer is None:
            self._consumer = Consumer({**self.conf, "group.id": f"mirrorstack-failover-{uuid.uuid4().hex}",
                                       "enable.auto.commit": False, "allow.auto.create.topics": False,
                                       # an offset below the log start (retention) reads from its start
                                       "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def answers(self) -> str | None:
        """None when the cluster answers a metadata request, else why not."""
        try:
            self.admin().list_topics(timeout=self.timeout)
            return None
        except Exception as exc:  # noqa: BLE001 (KafkaException: no broker answered)
            return f"{type(exc).__name__}: {exc}"

    def partitions(self) -> dict[str, list[int]]:
        meta = self.admin().list_topics(timeout=self.timeout)
        return {name: sorted(t.partitions) for name, t in meta.topics.items() if t.error is None}

    def watermarks(self, keys) -> dict[rules.Key, tuple[int, int]]:
        """(low, high) of each (topic, partition), asked again while a broker just back catches up."""
        from confluent_kafka import TopicPartition
        consumer = self.consumer()
        return {(t, p): asked_again(
            lambda t=t, p=p: consumer.get_watermark_offsets(TopicPartition(t, p), timeout=self.timeout, cached=False),
            lambda t=t: consumer.list_topics(t, timeout=self.timeout)) for t, p in keys}

    def read_topic(self, topic: str) -> list[tuple[bytes, bytes]]:
        """Every record of `topic` now (key, value), in order within each partition;
        [] when it does not exist."""
        from confluent_kafka import TopicPartition
        parts = self.partitions().get(topic)
        if not parts:
            return []
        marks = self.watermarks([(topic, p) for p in parts])
        todo = {p: hi for (_, p), (lo, hi) in marks.items() if hi > lo}
        if not todo:
            return []
        consumer = self.consumer()
        consumer.assign([TopicPartition(topic, p, marks[(topic, p)][0]) for p in todo])
        records, deadline = [], time.monotonic() + self.timeout * 4
        try:
            while todo:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.alias}: could not read {topic} to its end within "
                                       f"{self.timeout * 4:.0f}s")
                for msg in consumer.consume(num_messages=1000, timeout=0.5):
                    if msg.error() is None and msg.partition() in todo:
                        records.append((msg.key(), msg.value()))
                # Positions pass transaction markers too, which are never delivered.
                for tp in consumer.position([TopicPartition(topic, p) for p in list(todo)]):
                    if tp.offset >= todo[tp.partition]:
                        del todo[tp.partition]
        finally:
            consumer.unassign()
        return records

    def records(self, topic: str, partition: int, start: int, stop: int):
        """The records of topic/partition from offset `start` to before `stop`, in order; an error when
        none comes for the cluster's timeout (a transaction's markers take offsets and are never
        delivered: the position passing `stop` ends it too)."""
        from confluent_kafka import TopicPartition
        if start >= stop:
            return
        consumer = self.consumer()
        consumer.assign([TopicPartition(topic, partition, start)])
        quiet_until = time.monotonic() + self.timeout * 2
        try:
            while True:
                batch = [m for m in consumer.consume(num_messages=500, timeout=0.5)
                         if m.error() is None and m.partition() == partition]
                for msg in batch:
                    if msg.offset() >= stop:
                        return
                    yield msg
                (at,) = consumer.position([TopicPartition(topic, partition)])
                if at.offset >= stop:
                    return
                if batch:
                    quiet_until = time.monotonic() + self.timeout * 2
                elif time.monotonic() > quiet_until:
                    raise RuntimeError(f"{self.alias}: {topic}/{partition} gave no record for "
                                       f"{self.timeout * 2:.0f}s at offset {at.offset} (reading up to {stop})")
        finally:
            consumer.unassign()

    def count(self, topic: str, partition: int, start: int, stop: int) -> int:
        """How many records lie from offset `start` to before `stop` (a transaction's markers are none)."""
        return sum(1 for _ in self.records(topic, partition, start, stop))

    def first_record(self, topic: str, partition: int, start: int, stop: int) -> tuple[int, tuple] | None:
        """(offset, identity) of the first record at or after `start` and before `stop`; None: none."""
        for msg in self.records(topic, partition, start, stop):
            return msg.offset(), identity(msg)
        return None

    def find_copy(self, topic: str, partition: int, start: int, stop: int, wanted: tuple) -> tuple[int | None, int]:
        """(offset of the first record from `start` to before `stop` whose identity is `wanted`, how many
        records came before it); (None, how many there were) when none is."""
        passed = 0
        for msg in self.records(topic, partition, start, stop):
            if identity(msg) == wanted:
                return msg.offset(), passed
            passed += 1
        return None, passed

    def group_ids(self) -> list[str]:
        result = self.admin().list_consumer_groups(request_timeout=self.timeout).result(timeout=self.timeout)
        return sorted(g.group_id for g in result.valid)

    def committed(self, group: str) -> dict[rules.Key, int]:
        from confluent_kafka import ConsumerGroupTopicPartitions
        # a coordinator just back (the side an unplanned switch left) answers COORDINATOR_LOAD_IN_PROGRESS a while
        result = asked_again(lambda: self.admin().list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout)[group].result(timeout=self.timeout),
            lambda: None)
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}

    def members(self, groups: list[str]) -> dict[str, int]:
        from confluent_kafka import KafkaError, KafkaException
        if not groups:
            return {}
        futures = self.admin().describe_consumer_groups(groups, request_timeout=self.timeout)
        counts = {}
        for group, future in futures.items():
            try:
                counts[group] = len(future.result(timeout=self.timeout).members)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.GROUP_ID_NOT_FOUND:
                    raise
                counts[group] = 0
        return counts

    def write_offsets(self, group: str, offsets: dict[rules.Key, int]) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
        result = self.admin().alter_consumer_group_offsets([request], request_timeout=self.timeout)[group] \
            .result(timeout=self.timeout)
        failed = [f"{tp.topic}/{tp.partition}: {tp.error}" for tp in result.topic_partitions if tp.error]
        if failed:
            raise RuntimeError(f"writing the offsets of {group} on {self.alias} failed: {'; '.join(failed)}")


    def delete_groups(self, groups: list[str]) -> dict[str, str]:
        """Deletes `groups`; {group: why} of those that could not be (one already gone is deleted)."""
        from confluent_kafka import KafkaError, KafkaException
        failed = {}
        for group, future in self.admin().delete_consumer_groups(groups, request_timeout=self.timeout).items():
            try:
                future.result(timeout=self.timeout)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.GROUP_ID_NOT_FOUND:
                    failed[group] = str(exc.args[0])
        return failed


def identity(msg) -> tuple:
    """What makes a record itself wherever MM2 copied it: key, value, headers and timestamp (MM2 copies
    all four as bytes; the offset is the copy's own)."""
    return msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1]


def latest_checkpoints(cluster: Cluster, topic: str) -> dict[tuple[str, str, int], tuple[int, int]]:
    """{(group, topic on the target, partition): (upstream, downstream)} of the
    latest Checkpoint record of each, decoded as the validation job decodes them."""
    latest = {}
    for key, value in cluster.read_topic(topic):
        try:
            upstream, downstream, _ = decode_checkpoint_value(value)
            latest[decode_checkpoint_key(key)] = (upstream, downstream)
        except (ValueError, TypeError, IndexError):  # struct.error is a ValueError; foreign records are skipped
            continue
    return latest


def offset_syncs(cluster: Cluster, topic: str) -> dict[rules.Key, list[tuple[int, int]]]:
    """{(upstream topic, partition): [(upstream, downstream)]} in the order MM2 wrote them."""
    syncs: dict[rules.Key, list[tuple[int, int]]] = {}
    for key, value in cluster.read_topic(topic):
        try:
            t, p, upstream, downstream = decode_offset_sync(key, value)
        except (ValueError, TypeError, IndexError):
            continue
        syncs.setdefault((t, p), []).append((upstream, downstream))
    return syncs


def source_offsets(client, connector: str, flow: FlowDescription) -> dict[rules.Key, int]:
    """The source `connector`'s committed source offsets (KIP-875): the upstream
    offset of the last record it copied, per partition of `from`."""
    out = {}
    for entry in client.offsets(connector):
        part, offset = entry.get("partition") or {}, entry.get("offset") or {}
        if part.get("cluster") == flow.source and "offset" in offset:
            out[(part["topic"], int(part["partition"]))] = int(offset["offset"])
    return out
