"""Given positions: where a consumer would resume on the target (a downstream
offset per partition) against where its group stands on the source (the
upstream offset: the first record it has not read), proved by record identity
on the matched pairs, as the checkpoint check is. A failover drill hands its
group copies' positions here: the job proves that each copy would read exactly
the records after its group's position (re-read 0, lost 0)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .names import TOPIC


@dataclass(frozen=True)
class Position:
    """`name` (e.g. a drill's copy of `consumer_group`) at `downstream_offset` of the remote topic's
    partition, standing for the group at `upstream_offset` of the source topic's."""
    name: str
    consumer_group: str
    topic: str  # the source topic
    partition: int
    upstream_offset: int
    downstream_offset: int
    label: str = ""


def parse_positions(raw: Any, where: str, problems: list[str]) -> tuple[Position, ...]:
    """A flow's `positions`: [{"name", "consumer_group", "label"?, "partitions": [{"topic", "partition",
    "upstream_offset", "downstream_offset"}]}]."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.append(f"{where}: must be a list of positions")
        return ()
    out = []
    for i, entry in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(entry, dict):
            problems.append(f"{at}: must be an object with name, consumer_group and partitions")
            continue
        for key in sorted(set(entry) - {"name", "consumer_group", "label", "partitions"}):
            problems.append(f"{at}.{key}: unknown field (known: consumer_group, label, name, partitions)")
        texts = {k: entry.get(k) for k in ("name", "consumer_group")}
        for key, value in texts.items():
            if not isinstance(value, str) or not value:
                problems.append(f"{at}.{key}: required, a non-empty string")
        label = entry.get("label", "")
        if not isinstance(label, str):
            problems.append(f"{at}.label: must be a string")
        rows = entry.get("partitions")
        if not isinstance(rows, list) or not rows:
            problems.append(f"{at}.partitions: required, a non-empty list of "
                            "{topic, partition, upstream_offset, downstream_offset}")
            continue
        for j, row in enumerate(rows):
            position = _row(row, f"{at}.partitions[{j}]", problems)
            if position is not None and all(isinstance(v, str) and v for v in texts.values()):
                out.append(Position(texts["name"], texts["consumer_group"], *position,
                                    label=label if isinstance(label, str) else ""))
    return tuple(out)


def _row(row: Any, at: str, problems: list[str]) -> tuple | None:
    if not isinstance(row, dict):
        problems.append(f"{at}: must be an object with topic, partition, upstream_offset, downstream_offset")
        return None
    before = len(problems)
    for key in sorted(set(row) - {"topic", "partition", "upstream_offset", "downstream_offset"}):
        problems.append(f"{at}.{key}: unknown field (known: downstream_offset, partition, topic, upstream_offset)")
    if not isinstance(row.get("topic"), str) or not TOPIC.fullmatch(row["topic"]):
        problems.append(f"{at}.topic: required, the source topic's name")
    for key in ("partition", "upstream_offset", "downstream_offset"):
        value = row.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            problems.append(f"{at}.{key}: required, a non-negative integer")
    if len(problems) > before:
        return None
    return row["topic"], row["partition"], row["upstream_offset"], row["downstream_offset"]


def lost_and_reread(joined, key: str) -> dict[str, tuple[int, int]]:
    """{key: (lost, re-read)} over matched pairs (s_offset, t_offset) joined with where a consumer would
    resume (upstream_offset U on the source, downstream_offset D on the target): it LOSES the copies
    before D of records at or after U, and RE-READS the copies at or after D of records before U."""
    from pyspark.sql import functions as F
    lost = (F.col("t_offset") < F.col("downstream_offset")) & (F.col("s_offset") >= F.col("upstream_offset"))
    reread = (F.col("t_offset") >= F.col("downstream_offset")) & (F.col("s_offset") < F.col("upstream_offset"))
    return {r[key]: (int(r["lost"] or 0), int(r["reread"] or 0)) for r in joined.groupBy(key).agg(
        F.sum(lost.cast("long")).alias("lost"), F.sum(reread.cast("long")).alias("reread")).collect()}


def positions_outcome(flow_name: str, member_topic: str, remote_topic: str, positions, pairs,
                      window: dict[int, tuple[int, int]]) -> list[dict]:
    """Per position of this member's topic: the records the consumer would RE-READ (copies at or after the
    downstream offset of records before the upstream offset) and LOSE (copies before it of records at or
    after the upstream offset), over the matched pairs (partition, s_offset, t_offset) of the member.
    `window`: the source offsets the run read per partition; a position before its partition's window
    (validation.window) or on a partition the run did not read is `unproved`: the records around it
    were not compared."""
    from pyspark.sql import functions as F
    mine = [p for p in positions if p.topic == member_topic]
    if not mine:
        return []
    rows = [(p.name, p.partition, p.upstream_offset, p.downstream_offset) for p in mine]
    at = pairs.sparkSession.createDataFrame(
        rows, "name string, partition int, upstream_offset long, downstream_offset long")
    counted = lost_and_reread(pairs.join(F.broadcast(at), "partition"), "name")
    entries = []
    for name in sorted({p.name for p in mine}):
        of = [p for p in mine if p.name == name]
        lost_n, reread_n = counted.get(name, (0, 0))
        entries.append({"flow": flow_name, "name": name, "consumer_group": of[0].consumer_group,
                        "label": of[0].label, "topic": member_topic, "remote_topic": remote_topic,
                        "partitions": [{"partition": p.partition, "upstream_offset": p.upstream_offset,
                                        "downstream_offset": p.downstream_offset} for p in of],
                        "lost": lost_n, "reread": reread_n,
                        "unproved": unproved(of, window)})
    return entries


def unproved(positions, window: dict[int, tuple[int, int]]) -> list[int]:
    """The partitions of `positions` the run did not read, or whose position lies before what it read."""
    return sorted(p.partition for p in positions
                  if p.partition not in window or p.upstream_offset < window[p.partition][0])


def unproved_positions(flows, groups: list[dict]) -> list[str]:
    """Positions on a topic the run did not check (empty, or not one the flow replicates): said, not passed."""
    proved = {(e["flow"], e["name"], e["topic"]) for g in groups for e in g.get("positions", [])}
    left = sorted({(f.name, p.name, p.consumer_group, p.topic) for f in flows for p in f.positions
                   if (f.name, p.name, p.topic) not in proved})
    return [f"flow {flow}: position {name} (of group {group}) on {topic} was not proved: the run checked no "
            f"record of {topic} (empty, or not a topic the flow replicates)" for flow, name, group, topic in left]
