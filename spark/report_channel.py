"""The report as a record (the config's `report_to`): how it reaches the control
plane wherever the job ran. Written through Spark's Kafka sink when the job has
a session (the same Java client settings as its reads, on any master, Spark
Connect too), else through confluent_kafka; the topic is made first when
confluent_kafka can (Spark's sink makes none)."""
from __future__ import annotations

from dataclasses import dataclass

from mirrorstack.mm2.client_settings import librdkafka_config
from mirrorstack.mm2.validation_reports import REPORT_TOPIC, report_value

SEND_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class ReportTo:
    bootstrap: str
    client: dict[str, str]
    topic: str = REPORT_TOPIC


class ReportNotSent(RuntimeError):
    pass


def send_report(report_to: ReportTo, key: str, report: dict, spark=None) -> None:
    value = report_value(report)
    try:
        _make_topic(report_to)
        if spark is not None:
            frame = spark.createDataFrame([(key, bytearray(value))], "key string, value binary")
            # append: a topic takes records, and Kafka's V2 sink (the job reads through V2) refuses any other mode
            writer = (frame.write.format("kafka").mode("append")
                      .option("kafka.bootstrap.servers", report_to.bootstrap))
            for setting, setting_value in report_to.client.items():
                writer = writer.option(f"kafka.{setting}", setting_value)
            writer.option("topic", report_to.topic).save()
        else:
            _produce(report_to, key, value)
    except Exception as error:  # noqa: BLE001 - said once, with where it was going
        raise ReportNotSent(f"the report could not be written to topic {report_to.topic} at {report_to.bootstrap} "
                            f"({type(error).__name__}: {str(error).splitlines()[0][:300]}); fix: let the job's "
                            "client create and write that topic (ACLs), or create it") from None


def _conf(report_to: ReportTo) -> dict | None:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return None
    return librdkafka_config(report_to.bootstrap, report_to.client)


def _make_topic(report_to: ReportTo) -> None:
    conf = _conf(report_to)
    if conf is None:
        return  # the sink writes to a topic that exists, or that the brokers create
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient(conf)  # kept until the answer came: a dropped client ends its requests
    future = admin.create_topics([NewTopic(report_to.topic, num_partitions=1)],
                                 request_timeout=SEND_TIMEOUT_SECONDS)[report_to.topic]
    try:
        future.result(SEND_TIMEOUT_SECONDS)
    except KafkaException as error:
        if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def _produce(report_to: ReportTo, key: str, value: bytes) -> None:
    from confluent_kafka import Producer
    conf = _conf(report_to)
    if conf is None:
        raise RuntimeError("no Spark session, and confluent_kafka is missing or a client setting has no "
                           "librdkafka equivalent")
    failures: list = []
    producer = Producer({**conf, "log_level": 2})
    producer.produce(report_to.topic, key=key.encode(), value=value,
                     on_delivery=lambda error, _message: failures.append(error) if error else None)
    if producer.flush(SEND_TIMEOUT_SECONDS) or failures:
        raise RuntimeError(f"not delivered: {failures[0] if failures else 'timed out'}")
