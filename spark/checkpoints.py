"""MM2 Checkpoint records (Kafka's org.apache.kafka.connect.mirror.Checkpoint)
read with Spark: the decoding of mirrorstack.mm2.records as Spark SQL on executors, and
the latest checkpoint per (group, topic, partition)."""
from __future__ import annotations

from .spark_io import read_whole_topic


# Spark SQL doing the same as the two decoders, on executors (1-based substring).
CHECKPOINT_SQL = [
    ["key", "value", "partition AS cp_partition", "offset AS cp_offset",
     "cast(conv(hex(substring(key, 1, 2)), 16, 10) AS int) AS glen"],
    ["*", "decode(substring(key, 3, glen), 'UTF-8') AS group",
     "cast(conv(hex(substring(key, 3 + glen, 2)), 16, 10) AS int) AS tlen"],
    ["*", "decode(substring(key, 5 + glen, tlen), 'UTF-8') AS topic",
     "cast(conv(hex(substring(key, 5 + glen + tlen, 4)), 16, -10) AS int) AS partition",
     "cast(conv(hex(substring(value, 1, 2)), 16, -10) AS int) AS version",
     "cast(conv(hex(substring(value, 3, 8)), 16, -10) AS bigint) AS upstream_offset",
     "cast(conv(hex(substring(value, 11, 8)), 16, -10) AS bigint) AS downstream_offset"],
]


def checkpoints_frame(spark, bootstrap: str, client: dict[str, str], topic: str):
    """MM2 Checkpoint records of `topic`, decoded: group, topic, partition,
    upstream_offset, downstream_offset (plus cp_partition/cp_offset)."""
    from pyspark.sql import functions as F
    frame = read_whole_topic(spark, bootstrap, client, topic, headers=False)
    for columns in CHECKPOINT_SQL:
        frame = frame.selectExpr(*columns)
    return (frame.where(F.col("version") == 0)
            .where(F.col("group").isNotNull() & F.col("topic").isNotNull() & F.col("partition").isNotNull()
                   & F.col("upstream_offset").isNotNull() & F.col("downstream_offset").isNotNull())
            .select("group", "topic", "partition", "upstream_offset", "downstream_offset",
                    "cp_partition", "cp_offset"))


def latest_checkpoints(frame):
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    w = Window.partitionBy("group", "topic", "partition").orderBy(F.col("cp_partition").desc(),
                                                                  F.col("cp_offset").desc())
    return frame.withColumn("_n", F.row_number().over(w)).where("_n = 1").drop("_n")
