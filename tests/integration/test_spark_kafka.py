import pytest

from tests.support.kafka_clients import create_topic, produce
from tests.support.spark import local_spark

pytestmark = pytest.mark.integration


def test_pyspark_reads_1000_records_through_spark_sql_kafka(kafka_a):
    create_topic(kafka_a.bootstrap_servers, "spark-in", partitions=2, replication_factor=2)
    sent = produce(kafka_a.bootstrap_servers, "spark-in", 1000)

    with local_spark("test-spark-kafka") as spark:
        frame = (spark.read.format("kafka")
                 .option("kafka.bootstrap.servers", kafka_a.bootstrap_servers)
                 .option("subscribe", "spark-in")
                 .option("startingOffsets", "earliest")
                 .option("endingOffsets", "latest")
                 .load())
        assert frame.count() == 1000
        per_partition = {row["partition"]: row["n"] for row in
                         frame.groupBy("partition").count().withColumnRenamed("count", "n").collect()}
        rows = frame.select("partition", "offset", "key", "value").collect()

    expected_counts = {}
    for rec in sent:
        expected_counts[rec.partition] = expected_counts.get(rec.partition, 0) + 1
    assert per_partition == expected_counts
    assert {(r["partition"], r["offset"], bytes(r["key"]), bytes(r["value"])) for r in rows} == \
        {(s.partition, s.offset, s.key, s.value) for s in sent}
