"""Records purged at the source (retention, delete-records) before MM2 copied
them, per source partition, from the flow's offset syncs.

MM2's MirrorSourceTask writes an OffsetSync (upstream offset -> downstream
offset of one copied record) to `mm2-offset-syncs.<alias>.internal` whenever
the upstream offset jumps by more than 1 (OffsetSyncWriter.PartitionState:
"skippedUpstreamRecord"), on a task's first record, and every `offset.lag.max`
records. Between two syncs of a partition MM2 copied (d2 - d1) records while
the upstream offset moved (u2 - u1): the difference is upstream offsets never
copied. When retention or delete-records moves the source's log start past
the next offset to copy, the consumer resets to the log start (MM2's
auto.offset.reset=earliest) and the next sync shows exactly that jump.

Two parts, both per source partition:
- gaps: over consecutive syncs, max(0, (u2 - u1) - (d2 - d1)), counting only
  offsets below the source's log start now (a gap above it is records still
  there that MM2 skips on purpose: transaction markers, aborted records);
  syncs whose record is older than the window are left out;
- pending: a paused or lagging flow whose next offset to copy,
  u_last + (target end - d_last), is below the log start: those records are
  already gone (visible before the flow resumes).
Syncs may be coalesced (a throttled writer keeps the latest per partition):
the sums over longer spans stay right. Re-copied records (at-least-once after
a crash) make a span's downstream side longer: clamped to 0, never negative.
"""
from __future__ import annotations

import json

from .offsets import jvm_list_offsets
from .spark_io import read_whole_topic

# Kafka protocol types of org.apache.kafka.connect.mirror.OffsetSync (no version header):
# key Struct{topic: int16-length string, partition: int32}, value {upstream: int64, downstream: int64}.
OFFSET_SYNC_SQL = [
    ["key", "value", "partition AS sync_partition", "offset AS sync_offset",
     "unix_millis(timestamp) AS sync_ts", "cast(conv(hex(substring(key, 1, 2)), 16, 10) AS int) AS tlen"],
    ["*", "decode(substring(key, 3, tlen), 'UTF-8') AS topic",
     "cast(conv(hex(substring(key, 3 + tlen, 4)), 16, -10) AS int) AS partition",
     "cast(conv(hex(substring(value, 1, 8)), 16, -10) AS bigint) AS upstream_offset",
     "cast(conv(hex(substring(value, 9, 8)), 16, -10) AS bigint) AS downstream_offset"],
]


def purged_in_gaps(syncs: list[tuple[int, int]], log_start: int, counted: list[bool] | None = None) -> int:
    """Upstream offsets below `log_start` that consecutive syncs (upstream,
    downstream), in the order MM2 wrote them, show as never copied. `counted[i]`
    False leaves out the gap ending at syncs[i] (older than the window)."""
    purged = 0
    for i in range(1, len(syncs)):
        (u1, d1), (u2, d2) = syncs[i - 1], syncs[i]
        gap = (u2 - u1) - (d2 - d1)
        if gap <= 0 or (counted is not None and not counted[i]):
            continue
        # The uncopied offsets are the `gap` just before u2; those at or past the log start still exist.
        purged += max(0, min(u2, log_start) - (u2 - gap))
    return purged


def purged_pending(last_sync: tuple[int, int] | None, target_end: int, log_start: int) -> int:
    """Records gone from the source before MM2 reached them: the next offset to
    copy (the last sync's upstream offset plus what the target received after
    it) is below the source's log start."""
    if last_sync is None:
        return 0
    upstream, downstream = last_sync
    next_to_copy = upstream + max(0, target_end - downstream)
    return max(0, log_start - next_to_copy)


def offset_syncs(spark, bootstrap: str, client: dict[str, str], syncs_topic: str,
                 topic: str) -> dict[int, list[tuple[int, int, int]]]:
    """{source partition: [(upstream, downstream, sync timestamp ms)]} of
    `topic`, in the order written (the syncs topic has one partition; only
    this topic's syncs reach the driver)."""
    frame = read_whole_topic(spark, bootstrap, client, syncs_topic, headers=False)
    for columns in OFFSET_SYNC_SQL:
        frame = frame.selectExpr(*columns)
    rows = (frame.where(frame.topic == topic).where("upstream_offset IS NOT NULL AND downstream_offset IS NOT NULL")
            .select("partition", "upstream_offset", "downstream_offset", "sync_ts", "sync_partition", "sync_offset")
            .orderBy("sync_partition", "sync_offset").collect())
    out: dict[int, list[tuple[int, int, int]]] = {}
    for r in rows:
        out.setdefault(int(r["partition"]), []).append((int(r["upstream_offset"]), int(r["downstream_offset"]),
                                                         int(r["sync_ts"])))
    return out


def jvm_watermarks(spark, bootstrap: str, client: dict[str, str], topic: str) -> dict[int, tuple[int, int]] | None:
    """--offsets-via spark: {partition: (log start, end)} through the Kafka Admin
    client; None when the topic does not exist."""
    starts = jvm_list_offsets(spark, bootstrap, client, topic, "earliest")
    ends = jvm_list_offsets(spark, bootstrap, client, topic, "latest")
    if starts is None or ends is None:
        return None
    return {p: (starts[p], ends[p]) for p in ends}


def purged_for_group(validator, group) -> tuple[dict, dict[int, int]]:
    """The group's report fields `purged` (total), `purged_partitions` (one
    entry per source partition with purged records) and `purged_evidence`,
    and {member src: purged}. A target topic that several sources merge into
    (identity aggregation) has no per-source downstream offsets: not computed."""
    per_src = {m.src: 0 for m in group.members}
    if len(group.members) != 1:
        return {"purged": 0, "purged_partitions": [], "purged_evidence": "not computed (merged target topic)"}, per_src
    [m] = group.members
    if not m.flow.offset_syncs_topic:
        return {"purged": 0, "purged_partitions": [], "purged_evidence": "not computed (no offset_syncs_topic)"}, per_src

    def marks(bootstrap, client, topic):
        if validator.kafka:
            return validator.kafka.watermarks(bootstrap, client, topic)
        return jvm_watermarks(validator.spark, bootstrap, client, topic)

    source = marks(m.flow.source_bootstrap, m.flow.source_client, m.topic) or {}
    target = marks(group.target_bootstrap, group.target_client, group.topic) or {}
    syncs = offset_syncs(validator.spark, group.target_bootstrap, group.target_client, m.flow.offset_syncs_topic,
                         m.topic)
    since = validator.since_ms
    entries = []
    for p in sorted(source):
        log_start = source[p][0]
        pairs = [(u, d) for u, d, _ in syncs.get(p, [])]
        counted = [since is None or ts >= since for _, _, ts in syncs.get(p, [])]
        gaps = purged_in_gaps(pairs, log_start, counted)
        pending = purged_pending(pairs[-1] if pairs else None, target.get(p, (0, 0))[1], log_start)
        if gaps or pending:
            entries.append({"flow": m.flow.name, "topic": m.topic, "partition": p, "purged": gaps + pending,
                            "pending": pending, "log_start": log_start})
    total = sum(e["purged"] for e in entries)
    per_src[m.src] = total
    validator.log(f"purged {m.flow.name}:{m.topic}: {total} record(s) "
                  f"({json.dumps({e['partition']: e['purged'] for e in entries})})")
    return {"purged": total, "purged_partitions": entries,
            "purged_evidence": f"offset syncs in {m.flow.offset_syncs_topic}"}, per_src
