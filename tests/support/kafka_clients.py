"""Small helpers over confluent-kafka for producing and reading back records."""
from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


# Metadata still spreading after a topic was created or a leader moved: a
# broker answers these until it has caught up, under load for a second or more.
METADATA_LAG = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.NOT_LEADER_FOR_PARTITION,
                KafkaError.LEADER_NOT_AVAILABLE}
METADATA_LAG_SECONDS = 30


def until_metadata_settles(call, seconds: float = METADATA_LAG_SECONDS):
    """`call()`, again while it fails with METADATA_LAG, for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except KafkaException as e:
            if e.args[0].code() not in METADATA_LAG or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def admin(bootstrap: str, client: dict | None = None) -> AdminClient:
    """`client`: extra librdkafka settings (security) for this and the helpers below."""
    return AdminClient({"bootstrap.servers": bootstrap, **(client or {})})


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int,
                 client: dict | None = None) -> None:
    client = admin(bootstrap, client)  # must outlive the future, or the request is dropped
    futures = client.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor)])
    futures[topic].result(timeout=30)


def describe_partitions(bootstrap: str, topic: str) -> dict[int, tuple[list[int], list[int]]]:
    """{partition: (replicas, in-sync replicas)} as the cluster reports it."""
    def describe():
        meta = admin(bootstrap).list_topics(topic, timeout=10).topics[topic]
        if meta.error:
            raise KafkaException(meta.error)
        return {p.id: (list(p.replicas), list(p.isrs)) for p in meta.partitions.values()}
    return until_metadata_settles(describe)


def produce(bootstrap: str, topic: str, count: int, prefix: str = "rec", client: dict | None = None,
            per_second: float | None = None) -> list[Record]:
    """Produce `count` keyed records, acks=all, at most `per_second` when given (so a fault
    can land while records still flow); returns them with their offsets."""
    delivered: list[Record] = []
    errors: list = []

    def on_delivery(err, msg):
        if err:
            errors.append(err)
        else:
            delivered.append(Record(msg.partition(), msg.offset(), msg.key(), msg.value()))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5, **(client or {})})
    started = time.monotonic()
    for i in range(count):
        if per_second and i % 1000 == 0:
            time.sleep(max(0.0, started + i / per_second - time.monotonic()))
        producer.produce(topic, key=f"{prefix}-key-{i % 97}".encode(),
                         value=f"{prefix}-value-{i}-{uuid.uuid4().hex}".encode(),
                         on_delivery=on_delivery)
        producer.poll(0)
    remaining = producer.flush(60)
    if errors or remaining:
        raise AssertionError(f"produce failed: {errors[:3]}, {remaining} undelivered")
    return delivered


def consume(bootstrap: str, topic: str, expected: int, timeout: float = 120.0,
            client: dict | None = None, linger: float = 0.0) -> list[Record]:
    """Read `topic` from the beginning until `expected` records or the timeout, then on for
    `linger` seconds (a surplus would show); returns what was read (maybe fewer: the caller asserts)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"test-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "topic.metadata.refresh.interval.ms": 1000, **(client or {})})
    consumer.subscribe([topic])
    records: list[Record] = []
    deadline = time.monotonic() + timeout
    try:
        lingering = False
        while time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=1.0):
                if msg.error():
                    continue  # e.g. UNKNOWN_TOPIC_OR_PART until the topic exists
                records.append(Record(msg.partition(), msg.offset(), msg.key(), msg.value()))
            if len(records) >= expected and not lingering:
                if not linger:
                    break
                deadline, lingering = min(deadline, time.monotonic() + linger), True
    finally:
        consumer.close()
    return records


def by_partition(records: list[Record]) -> dict[int, list[tuple]]:
    """(key, value) per partition in offset order: what replication must preserve."""
    out: dict[int, list[tuple]] = {}
    for rec in sorted(records, key=lambda r: (r.partition, r.offset)):
        out.setdefault(rec.partition, []).append((rec.key, rec.value))
    return out


def topic_names(bootstrap: str, client: dict | None = None) -> set[str]:
    return set(admin(bootstrap, client).list_topics(timeout=10).topics)


def wait_for_count(bootstrap: str, topic: str, expected: int, timeout: float = 180.0) -> list[Record]:
    """Consume `topic` until `expected` records arrived; then keep reading 3 s
    longer, so a surplus (duplicates, loops) would be seen too."""
    return consume(bootstrap, topic, expected=expected, timeout=timeout, linger=3.0)


def consume_group(bootstrap: str, topic: str, group: str, max_records: int, timeout: float = 60.0,
                  reset: str = "earliest") -> list[Record]:
    """Read up to `max_records` as consumer group `group`, committing what was read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": reset,
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    records: list[Record] = []
    deadline = time.monotonic() + timeout
    try:
        while len(records) < max_records and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=min(100, max_records - len(records)), timeout=1.0):
                if not msg.error():
                    records.append(Record(msg.partition(), msg.offset(), msg.key(), msg.value()))
        if records:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return records


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int,
                      client: dict | None = None) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    client = admin(bootstrap, client)
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    result = client.list_consumer_group_offsets([request])[group].result(timeout=30)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def end_offsets(bootstrap: str, topic: str, client: dict | None = None) -> int:
    """The sum of `topic`'s high watermarks now (records written, for a topic
    without transactions or deletions); 0 while it does not exist. Quick: no
    consumer group is joined."""
    from confluent_kafka import TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"test-{uuid.uuid4().hex}", **(client or {})})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return 0
        return until_metadata_settles(lambda: sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in meta.partitions))
    finally:
        consumer.close()


def consume_group_to_end(bootstrap: str, topic: str, group: str, timeout: float = 60.0,
                         reset: str = "earliest") -> list[Record]:
    """As consume_group (the same consumer settings; commits what was read), but
    reads until the group's position is at the end of every partition of `topic`
    (from its committed offset, else `reset`), not for a number of records: for a
    topic nothing writes to any more, everything there is to read. Fails if the
    end is not reached within `timeout`."""
    from confluent_kafka import TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": reset,
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    records: list[Record] = []
    deadline = time.monotonic() + timeout

    def at_end() -> bool:
        assigned = consumer.assignment()
        if not assigned:
            return False
        committed = {tp.partition: tp.offset for tp in consumer.committed(assigned, timeout=10)}
        for tp in consumer.position(assigned):
            low, high = until_metadata_settles(lambda: consumer.get_watermark_offsets(
                TopicPartition(topic, tp.partition), timeout=10, cached=False))
            at = tp.offset if tp.offset >= 0 else committed.get(tp.partition, -1)
            if reset == "latest" and at < 0:
                at = high
            if (at if at >= 0 else low) < high:
                return False
        return True

    try:
        while True:
            for msg in consumer.consume(num_messages=100, timeout=1.0):
                if not msg.error():
                    records.append(Record(msg.partition(), msg.offset(), msg.key(), msg.value()))
            if at_end():
                break
            assert time.monotonic() < deadline, f"{group} did not reach the end of {topic} within {timeout:.0f}s"
        if records:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return records


def delete_first_record(bootstrap: str, topic: str, partition: int = 0, client: dict | None = None) -> Record:
    """Deletes the first record `partition` of `topic` holds (Kafka's DeleteRecords moves its log
    start past it) and returns it: a record lost on a target, as a validation must find it."""
    from confluent_kafka import TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"test-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, **(client or {})})
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
        consumer.assign([TopicPartition(topic, partition, low)])
        deadline, message = time.monotonic() + 30, None
        while message is None or message.error():
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}[{partition}]: no record at offset {low} within 30 s")
            message = consumer.poll(1.0)
        first = Record(message.partition(), message.offset(), message.key(), message.value())
    finally:
        consumer.close()
    client_ = admin(bootstrap, client)  # must outlive the future
    [future] = client_.delete_records([TopicPartition(topic, partition, first.offset + 1)],
                                      request_timeout=30).values()
    assert future.result(60).low_watermark == first.offset + 1
    return first


class SteadyProducer(threading.Thread):
    """Writes acks=all to `topic` until stopped (`stop.set()`, then `join()`); counts delivery errors."""

    def __init__(self, bootstrap: str, topic: str, per_second: int = 40):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 60_000})
        self.topic, self.pause = topic, 1 / per_second
        self.sent, self.delivered, self.errors = 0, 0, []
        self.stop = threading.Event()

    def _on_delivery(self, err, _msg):
        if err:
            self.errors.append(err)
        else:
            self.delivered += 1

    def run(self):
        while not self.stop.is_set():
            self.producer.produce(self.topic, key=f"k{self.sent % 17}".encode(), value=f"rolling-{self.sent}".encode(),
                                  on_delivery=self._on_delivery)
            self.sent += 1
            self.producer.poll(0)
            time.sleep(self.pause)
        self.remaining = self.producer.flush(90)
