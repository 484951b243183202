"""MirrorMaker 2's binary records: Checkpoint (org.apache.kafka.connect.mirror.Checkpoint)
and OffsetSync (…mirror.OffsetSync), decoded (and encoded, for tests and tooling).

Shared by the validation job and the control plane (failover reads the
checkpoints and offset syncs with these). Standard library only."""
from __future__ import annotations

import struct


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


def encode_offset_sync(topic: str, partition: int, upstream: int, downstream: int) -> tuple[bytes, bytes]:
    raw = topic.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw + struct.pack(">i", partition), struct.pack(">qq", upstream, downstream)


def decode_offset_sync(key: bytes, value: bytes) -> tuple[str, int, int, int]:
    """(topic, partition, upstream offset, downstream offset) of an OffsetSync record."""
    (length,) = struct.unpack_from(">h", key, 0)
    topic = key[2:2 + length].decode("utf-8")
    (partition,) = struct.unpack_from(">i", key, 2 + length)
    upstream, downstream = struct.unpack_from(">qq", value, 0)
    return topic, partition, upstream, downstream
