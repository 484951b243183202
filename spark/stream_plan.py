"""What the continuous validation reads (streaming.py): each flow's source topics by its own
patterns, each target cluster once by the remote names of every flow into it, as one stream of
ROWS keyed by (target cluster, target topic, partition); and which flows a target topic's copies
belong to, as MM2 decides what it copies (FlowSelection). Spark's Kafka source lists the topics a
pattern matches at every batch, so a topic made later is read from its start."""
from __future__ import annotations

from .spark_io import MATCH_KEY, hashed_records, read_kafka

ROWS = "c int, topic string, partition int, src int, offset long, ts long, h1 long, h2 long"
TARGET = -1  # `src` of a target row; a source row's is its flow's number in the config


def _stream(spark, bootstrap: str, client: dict[str, str], pattern: str, start_ms: int):
    return read_kafka(spark, bootstrap, client, stream=True, subscribePattern=pattern, includeHeaders="true",
                      startingTimestamp=str(start_ms),
                      # a partition with no record since then starts at its end, not with an error
                      startingOffsetsByTimestampStrategy="latest",
                      failOnDataLoss="false")  # a retention gap is reported missing, not fatal


def java_union(patterns) -> str:
    return "|".join(f"(?:{p})" for p in patterns)


class Plan:
    """The flows (spark.config.FlowSpec) as the validator reads them; `c` numbers a target cluster."""

    def __init__(self, flows):
        self.flows = list(flows)
        self.targets: list[tuple[str, dict[str, str]]] = []  # (bootstrap, client) of each target cluster
        self.target_of: list[int] = []  # flow -> its target cluster's number
        self.target_aliases: list[str] = []  # of each target cluster ("" where the flows name none)
        for flow in self.flows:
            where = (flow.target_bootstrap, dict(flow.target_client or {}))
            for c, known in enumerate(self.targets):
                if known[0] == where[0]:
                    if flow.target_client:  # read_committed for one flow's copies is right for all
                        known[1].update(flow.target_client)
                    break
            else:
                c = len(self.targets)
                self.targets.append(where)
                self.target_aliases.append(flow.target_alias or "")
            self.target_of.append(c)
        self._claims: dict[tuple[int, str], tuple[int, ...]] = {}

    def prefix(self, f: int) -> str:
        flow = self.flows[f]
        return "" if flow.policy == "identity" else flow.mm2.remote_topic(flow.source_alias, "")

    def source_pattern(self, f: int) -> str:
        """The flow's topic regexes (Java's, as MM2's), or its topics by name."""
        flow = self.flows[f]
        return java_union(flow.topic_patterns or [f"\\Q{topic}\\E" for topic in flow.topics])

    def picks(self, f: int, topic: str) -> bool:
        flow = self.flows[f]
        return flow.selects(topic) if flow.topic_patterns else topic in flow.topics

    def target_pattern(self, c: int) -> str:
        return java_union(f"\\Q{self.prefix(f)}\\E(?:{self.source_pattern(f)})" if self.prefix(f)
                          else self.source_pattern(f) for f in range(len(self.flows)) if self.target_of[f] == c)

    def upstream(self, f: int, topic: str) -> str | None:
        prefix = self.prefix(f)
        return topic[len(prefix):] if topic.startswith(prefix) else None

    def claims(self, c: int, topic: str) -> tuple[int, ...]:
        """The flows whose copies `topic` of target cluster `c` holds (none: not a copy we check)."""
        key = (c, topic)
        if key not in self._claims:
            self._claims[key] = tuple(
                f for f, flow in enumerate(self.flows)
                if self.target_of[f] == c and (up := self.upstream(f, topic)) is not None and self.picks(f, up)
                and flow.remote_topic(up) == topic)
        return self._claims[key]

    def rows(self, spark, start_ms: int):
        """The sources and targets as one stream of ROWS."""
        from pyspark.sql import functions as F
        frames = []
        for f, flow in enumerate(self.flows):
            hashed = hashed_records(_stream(spark, flow.source_bootstrap, flow.source_client,
                                            self.source_pattern(f), start_ms), "topic")
            remote = F.concat(F.lit(self.prefix(f)), F.col("topic")) if self.prefix(f) else F.col("topic")
            frames.append(hashed.select(F.lit(self.target_of[f]).alias("c"), remote.alias("topic"), "partition",
                                        F.lit(f).alias("src"), "offset", *MATCH_KEY[1:]))
        for c, (bootstrap, client) in enumerate(self.targets):
            hashed = hashed_records(_stream(spark, bootstrap, client, self.target_pattern(c), start_ms), "topic")
            frames.append(hashed.select(F.lit(c).alias("c"), "topic", "partition", F.lit(TARGET).alias("src"),
                                        "offset", *MATCH_KEY[1:]))
        union = frames[0]
        for frame in frames[1:]:
            union = union.unionByName(frame)
        return union
