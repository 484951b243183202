"""MM2 Checkpoint records (Kafka's org.apache.kafka.connect.mirror.Checkpoint):
the binary format in Python (decoders, and an encoder for tests), the same
decoding as Spark SQL on executors, and the latest checkpoint per
(group, topic, partition)."""
from __future__ import annotations

import struct

from validation_spark import read_whole_topic

def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", buf, pos)
    if length < 0 or pos + 2 + length > len(buf):
        raise ValueError(f"bad string length {length} at {pos}")
    return buf[pos + 2:pos + 2 + length].decode("utf-8"), pos + 2 + length


def decode_checkpoint_key(key: bytes) -> tuple[str, str, int]:
    """(group, topic, partition) of a Checkpoint record key (Kafka's Type
    serialization: int16-length UTF-8 strings, int32, big-endian)."""
    group, pos = _read_string(key, 0)
    topic, pos = _read_string(key, pos)
    (partition,) = struct.unpack_from(">i", key, pos)
    return group, topic, partition


def decode_checkpoint_value(value: bytes) -> tuple[int, int, str]:
    """(upstream offset, downstream offset, metadata) of a Checkpoint value:
    an int16 version header (0), then int64, int64, int16-length string."""
    (version,) = struct.unpack_from(">h", value, 0)
    if version != 0:
        raise ValueError(f"unknown Checkpoint version {version}")
    upstream, downstream = struct.unpack_from(">qq", value, 2)
    metadata, _ = _read_string(value, 18)
    return upstream, downstream, metadata


def encode_checkpoint(group: str, topic: str, partition: int, upstream: int, downstream: int,
                      metadata: str = "") -> tuple[bytes, bytes]:
    """The inverse of the two decoders (for tests and tooling)."""
    def s(text: str) -> bytes:
        raw = text.encode("utf-8")
        return struct.pack(">h", len(raw)) + raw
    return (s(group) + s(topic) + struct.pack(">i", partition),
            struct.pack(">hqq", 0, upstream, downstream) + s(metadata))


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
