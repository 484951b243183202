"""The reconciliation: snapshot of the source windows, the wait for the
targets, and per target topic both sides grouped on the match key, which
classifies every record as matched, missing, in flight, duplicate or extra
(a key's k-th copy is its k-th source record's); order, lag and failover outcomes."""
from __future__ import annotations

import datetime
import json
import re
import time
from functools import reduce
from typing import Callable

from .checkpoints import checkpoints_frame, latest_checkpoints
from .config import EXIT_FAILED, EXIT_PASSED, BadInput, Config, Group, Member, _log
from .offsets import KafkaClientOffsets, jvm_list_offsets, spark_partition_stats
from .positions import lost_and_reread, positions_outcome, unproved_positions
from .progress import WaitProgress, partitions_behind, why
from .purged import purged_for_group
from .report import group_failures
from .spark_io import MATCH_KEY, hashed_records, read_kafka, read_whole_topic, tasks_for


# The kinds of a record read on the target (the others are source records without a copy).
TARGET_KINDS = ("matched", "duplicates", "extras")
SOURCE_KINDS = ("matched", "in_flight", "stalled", "missing")  # a source record's, exactly one of these
REPEATED = "repeated"  # a key seen more than once on a side, before its rows are paired in lists

# A source record's (src, offset) as one long, src in the top 8 bits: a fixed-width value, so
# grouping on the match key runs as a hash aggregate (lists of structs made Spark sort every row:
# 48 s against 19 s for 20M rows). Ordered as (src, offset). Kafka offsets stay far below 2^55 (a
# million records a second for a thousand years); config.MAX_MEMBERS bounds src.
OFFSET_BITS = 55


def packed_source():
    from pyspark.sql import functions as F
    return (F.shiftleft(F.col("src").cast("long"), OFFSET_BITS) + F.col("offset")).alias("s")


def src_of(packed):
    from pyspark.sql import functions as F
    return F.shiftright(packed, OFFSET_BITS).cast("int")


def offset_of(packed):
    from pyspark.sql import functions as F
    return (F.col(packed) if isinstance(packed, str) else packed).bitwiseAND(F.lit((1 << OFFSET_BITS) - 1))


class Validator:
    def __init__(self, config: Config, spark, offsets_via: str, poll_seconds: float, sample_size: int,
                 log: Callable[[str], None] = _log, shuffle_partitions: int | None = None):
        self.config, self.spark, self.offsets_via = config, spark, offsets_via
        self.shuffle_partitions = shuffle_partitions
        self.poll_seconds, self.sample_size, self.log = poll_seconds, sample_size, log
        self.kafka = KafkaClientOffsets() if offsets_via == "kafka-client" else None
        self.persisted: list = []
        self._cores: int | None = None
        # The window's start, fixed once: records at or after it (record timestamps,
        # which MM2 copies from the source) are checked on both sides.
        self.since_ms = (None if config.window_seconds is None
                         else int((time.time() - config.window_seconds) * 1000))

    def _since(self, bootstrap: str, client: dict[str, str], topic: str) -> dict | None:
        """{partition: first offset in the window (the end offset where no record
        is that recent)}; None: the topic does not exist."""
        if self.kafka:
            marks = self.kafka.watermarks(bootstrap, client, topic)
            firsts = None if marks is None else self.kafka.offsets_for_time(bootstrap, client, topic, marks,
                                                                              self.since_ms)
        else:
            marks = None
            firsts = jvm_list_offsets(self.spark, bootstrap, client, topic, "time", self.since_ms)
        if firsts is None:
            return None
        # Spark cannot start a batch read at "latest": an empty window starts at the end offset.
        return {p: o if o is not None else marks[p][1] for p, o in firsts.items()}

    def _in_window(self, frame):
        from pyspark.sql import functions as F
        return frame if self.since_ms is None else frame.where(F.col("ts") >= F.lit(self.since_ms))

    # -- offsets
    def snapshot(self) -> dict[tuple[int, str], dict[int, tuple[int, int]]]:
        """{(flow index, topic): {partition: (begin, snapshot end)}} taken now."""
        out, problems = {}, []
        for flow in self.config.flows:
            for j, topic in enumerate(flow.topics):
                if self.kafka:
                    marks = self.kafka.watermarks(flow.source_bootstrap, flow.source_client, topic)
                    if marks is None:
                        problems.append(f"flows[{flow.index}].topics[{j}]: topic {topic!r} does not exist at "
                                        f"{flow.source_bootstrap}")
                        continue
                elif self.since_ms is not None:  # offsets from the Admin client: no record read
                    lows, highs = (jvm_list_offsets(self.spark, flow.source_bootstrap, flow.source_client, topic, w)
                                   for w in ("earliest", "latest"))
                    if highs is None:
                        problems.append(f"flows[{flow.index}].topics[{j}]: topic {topic!r} does not exist at "
                                        f"{flow.source_bootstrap}")
                        continue
                    marks = {p: (lows[p], highs[p]) for p in highs}
                else:
                    marks = spark_partition_stats(self.spark, flow.source_bootstrap, flow.source_client, topic)
                    if not marks:
                        problems.append(f"flows[{flow.index}].topics[{j}]: topic {topic!r} has no records (or does "
                                        f"not exist) at {flow.source_bootstrap}")
                        continue
                if self.since_ms is not None:  # [first offset in the window, snapshot end)
                    firsts = self._since(flow.source_bootstrap, flow.source_client, topic) or {}
                    marks = {p: (min(max(b, firsts.get(p) if firsts.get(p) is not None else e), e), e)
                             for p, (b, e) in marks.items()}
                out[(flow.index, topic)] = marks
                self.log(f"snapshot {flow.name}:{topic}: {sum(e - b for b, e in marks.values())} records "
                         f"in {len(marks)} partition(s)")
        if problems:
            raise BadInput(problems)
        return out

    def target_partitions(self, group: Group) -> int | None:
        if self.kafka:
            marks = self.kafka.watermarks(group.target_bootstrap, group.target_client, group.topic)
            return None if marks is None else len(marks)
        if self.since_ms is not None:  # the window may leave partitions without records: ask the Admin client
            highs = jvm_list_offsets(self.spark, group.target_bootstrap, group.target_client, group.topic, "latest")
            return None if highs is None else len(highs)
        return None  # spark mode, whole history: from the records read

    def target_partition_counts(self, group: Group) -> dict[int, int]:
        """Records each partition of the target topic holds (in the window: from its first record in it);
        committed records only on a transactional target."""
        from pyspark.sql import functions as F
        # A transactional target's offsets include its commit markers (a CI run: 9,377 offsets held 5,979
        # records), so only there are the records counted, not the offsets.
        if self.kafka and not group.reads_committed:
            marks = self.kafka.watermarks(group.target_bootstrap, group.target_client, group.topic)
            if marks is None:
                return {}
            if self.since_ms is not None:
                firsts = self._since(group.target_bootstrap, group.target_client, group.topic) or {}
                marks = {p: (high if firsts.get(p) is None else max(low, firsts[p]), high)
                         for p, (low, high) in marks.items()}
            return {p: high - low for p, (low, high) in marks.items()}
        rows = self.target_frame(group, hashed=False).groupBy("partition").agg(F.count("*").alias("n")).collect()
        return {r["partition"]: r["n"] for r in rows}

    def target_frame(self, group: Group, hashed: bool = True, hint: int = 0,
                     ends: dict[int, int] | None = None):
        """The target topic's records, in the window: read from each partition's
        first offset in it (Kafka's time index), then filtered on the timestamp;
        up to `ends` ({partition: end offset}) when given, else to the end now."""
        kw = {"minPartitions": str(tasks_for(hint, self.cores))} if hashed else {}
        starts = None if self.since_ms is None else self._since(group.target_bootstrap, group.target_client,
                                                               group.topic)
        if ends is not None:
            first = starts or {}
            raw = read_kafka(self.spark, group.target_bootstrap, group.target_client,
                             assign=json.dumps({group.topic: sorted(ends)}),
                             startingOffsets=json.dumps({group.topic: {str(p): first.get(p, -2) for p in ends}}),
                             endingOffsets=json.dumps({group.topic: {str(p): e for p, e in ends.items()}}),
                             includeHeaders="true" if hashed else "false", **kw)
        elif self.since_ms is None or starts is None:  # whole history, or no such topic (an empty read)
            raw = read_whole_topic(self.spark, group.target_bootstrap, group.target_client, group.topic,
                                   headers=hashed, **kw)
        else:
            raw = read_kafka(self.spark, group.target_bootstrap, group.target_client,
                             assign=json.dumps({group.topic: sorted(starts)}),
                             startingOffsets=json.dumps({group.topic: {str(p): o for p, o in starts.items()}}),
                             endingOffsets="latest", includeHeaders="true" if hashed else "false", **kw)
        if not hashed:
            from pyspark.sql import functions as F
            return raw if self.since_ms is None else raw.where(F.expr("unix_millis(timestamp)") >= self.since_ms)
        return self._in_window(hashed_records(raw))

    @property
    def cores(self) -> int:
        """The cores the job's tasks run on (1 where Spark Connect does not say)."""
        if self._cores is None:
            try:
                self._cores = max(1, int(self.spark.sparkContext.defaultParallelism))
            except Exception:  # noqa: BLE001 - a Spark Connect session has no SparkContext
                self._cores = 1
        return self._cores

    def _persist(self, frame):
        from pyspark import StorageLevel
        # On disk, not the heap: cached batches of 10M+ rows would not fit a 1g driver.
        frame = frame.persist(StorageLevel.DISK_ONLY)
        self.persisted.append(frame)
        return frame

    # -- the frames
    def _member_range(self, m: Member, ranges: dict[int, tuple[int, int]]):
        """The source records of `m` in {partition: (begin, end)} offsets, hashed, in the window, with `src`."""
        from pyspark.sql import functions as F
        raw = read_kafka(
            self.spark, m.flow.source_bootstrap, m.flow.source_client,
            assign=json.dumps({m.topic: sorted(ranges)}),
            startingOffsets=json.dumps({m.topic: {str(p): b for p, (b, _) in ranges.items()}}),
            endingOffsets=json.dumps({m.topic: {str(p): e for p, (_, e) in ranges.items()}}),
            includeHeaders="true", minPartitions=str(tasks_for(sum(e - b for b, e in ranges.values()), self.cores)))
        return self._in_window(hashed_records(raw)).withColumn("src", F.lit(m.src))

    def source_frame(self, group: Group, snap, keep: bool = True):
        frames = [self._member_range(m, snap[(m.flow.index, m.topic)]) for m in group.members]
        union = reduce(lambda a, b: a.unionByName(b), frames)
        return self._persist(union) if keep else union

    @staticmethod
    def offsets_expected(group: Group, snap) -> dict[int, int]:
        """{target partition: records} its sources' windows hold at most: their offset ranges (an offset
        range overcounts a compacted or transactional partition, and a window's filter on timestamps)."""
        expected: dict[int, int] = {}
        for m in group.members:
            for partition, (begin, end) in snap[(m.flow.index, m.topic)].items():
                expected[partition] = expected.get(partition, 0) + end - begin
        return expected

    def after_snapshot_frame(self, group: Group, snap):
        """The sources' records after the snapshot, up to their end offsets now
        (hashed, with `src`); None when no source took any."""
        frames = []
        for m in group.members:
            marks = snap[(m.flow.index, m.topic)]
            if self.kafka:
                now = {p: high for p, (_, high) in (self.kafka.watermarks(
                    m.flow.source_bootstrap, m.flow.source_client, m.topic) or {}).items()}
            else:
                now = jvm_list_offsets(self.spark, m.flow.source_bootstrap, m.flow.source_client, m.topic,
                                       "latest") or {}
            later = {p: (e, now[p]) for p, (_, e) in marks.items() if now.get(p, e) > e}
            if later:
                frames.append(self._member_range(m, later))
        return reduce(lambda a, b: a.unionByName(b), frames) if frames else None

    def wait_for_targets(self, expected: dict[int, dict[int, int]], looked: WaitProgress | None = None,
                         once: bool = False) -> tuple[dict[int, int], float, WaitProgress, set[int]]:
        """Until each target partition holds its sources' window of that partition
        (`expected`: {group: {partition: records}}), bounded by wait_seconds; what
        each target partition took meanwhile is the evidence of records in flight.
        Per partition, not per topic: while sources take new records, one partition
        running ahead must not hide another still behind. Returns the groups still
        behind when the wait ended. `looked`: a first look already taken (the wait
        starts from it); `once`: only this look, no wait."""
        groups, progress = self.config.groups, looked or WaitProgress()
        started = time.monotonic()
        deadline = started + self.config.wait_seconds
        look = looked is None
        while True:
            if look:
                for i in expected:
                    progress.observe(i, self.target_partition_counts(groups[i]))
            look = True
            counts = {i: sum(progress.last[i].values()) for i in expected}
            behind = {i: n for i in expected
                      if (n := partitions_behind(expected[i], progress.last[i], counts[i]))}
            elapsed = time.monotonic() - started
            if not behind:
                self.log(f"targets hold the expected records after {elapsed:.1f}s")
                return counts, elapsed, progress, set()
            if once:
                return counts, elapsed, progress, set(behind)
            if time.monotonic() >= deadline:
                self.log(f"wait bound of {self.config.wait_seconds:.0f}s expired; still behind: "
                         + ", ".join(f"{groups[i].topic} by {n} (took {progress.taken(i)} during the wait)"
                                     for i, n in behind.items()))
                return counts, elapsed, progress, set(behind)
            self.log(f"waiting ({elapsed:.0f}s of {self.config.wait_seconds:.0f}s): "
                     + ", ".join(f"{groups[i].topic} {sum(expected[i].values()) - n} of {sum(expected[i].values())}"
                                 for i, n in behind.items()))
            time.sleep(max(0.0, min(self.poll_seconds, deadline - time.monotonic())))

    # -- one group
    def classify(self, source, target, timed_out: bool, moving: set[int]):
        """Every record of both sides as (src, partition, s_offset, t_offset, partner, kind), and
        the count of each (src, partition, kind). Both sides are grouped on the match key once, in
        fixed-width aggregates (counts and least offsets): a key seen at most once on each side is
        matched, missing or extra from them alone. Only keys seen several times (repeated records,
        duplicate copies) have their rows read again and paired in lists (`paired_in_lists`)."""
        from pyspark.sql import functions as F
        mk = MATCH_KEY
        sides = source.select(*mk, packed_source(), F.lit(None).cast("long").alias("t")) \
            .unionByName(target.select(*mk, F.lit(None).cast("long").alias("s"), F.col("offset").alias("t")))
        per_key = sides.groupBy(*mk).agg(F.count("s").alias("ns"), F.count("t").alias("nt"),
                                         F.min("s").alias("s"), F.min("t").alias("t"))
        per_key = self._persist(per_key.withColumn("multi", (F.col("ns") > 1) | (F.col("nt") > 1)))

        def singles(keys):
            return keys.select(src_of("s").alias("src"), "partition", offset_of("s").alias("s_offset"),
                               F.col("t").alias("t_offset"), F.lit(None).cast("long").alias("partner"), "multi")
        # One pass counts the kinds of the keys seen once and how many keys repeat: with none
        # (nearly always), those are the counts.
        first = self.kinds(singles(per_key), timed_out, moving, keep=("multi",))
        counts = self.counted(first.withColumn("kind", F.when(F.col("multi"), F.lit(REPEATED))
                                               .otherwise(F.col("kind"))))
        repeated = any(r["kind"] == REPEATED for r in counts)
        pairs = singles(per_key.where(~F.col("multi"))).drop("multi")
        if repeated:  # (a target not kept is read again, up to the same end offsets)
            rows = sides.join(per_key.where("multi").select(*mk), on=mk, how="left_semi")
            pairs = pairs.unionByName(self.paired_in_lists(rows))
        classified = self.kinds(pairs, timed_out, moving)
        if not repeated:  # a projection of the kept aggregate: not kept twice (unless a window ran)
            return (self._persist(classified) if timed_out else classified), counts
        classified = self._persist(classified)
        return classified, self.counted(classified)

    @staticmethod
    def counted(rows) -> list:
        """The count of each (src, partition, kind), with the least and greatest distance between a
        pair's target and source offsets (`shift_min`, `shift_max`; null but where both are known).
        Where the two are equal for the matched pairs of a (src, partition), each copy is its source
        record's offset moved by the same amount: in order, with no sort needed to prove it."""
        from pyspark.sql import functions as F
        shift = F.col("t_offset") - F.col("s_offset")
        return rows.groupBy("src", "partition", "kind").agg(
            F.count("*").alias("count"), F.min(shift).alias("shift_min"), F.max(shift).alias("shift_max")).collect()

    @staticmethod
    def paired_in_lists(rows):
        """Keys seen several times: a key's k-th copy (by offset) paired with its k-th source record
        (by source, then offset). A copy without a source record of its own is a duplicate of the
        key's first source record (`partner`, whose `src` it counts for), or an extra where the key
        has none."""
        from pyspark.sql import functions as F
        # collect_list skips the nulls: each key's source records, and its copies, each in order.
        keyed = rows.groupBy(*MATCH_KEY).agg(F.sort_array(F.collect_list("s")).alias("S"),
                                             F.sort_array(F.collect_list("t")).alias("T"))
        pairs = keyed.select("partition", F.get("S", 0).alias("first"),  # null where S is empty
                             F.explode(F.arrays_zip("S", "T")).alias("pair"))
        return pairs.select(src_of(F.coalesce("pair.S", "first")).alias("src"), "partition",
                            offset_of("pair.S").alias("s_offset"), F.col("pair.T").alias("t_offset"),
                            offset_of("first").alias("partner"))

    @staticmethod
    def kinds(pairs, timed_out: bool, moving: set[int], keep: tuple[str, ...] = ()):
        """Each paired row's kind: matched, in flight, stalled, missing, duplicates or extras
        (`keep`: more of its columns to keep)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F
        has_s, has_t = F.col("s_offset").isNotNull(), F.col("t_offset").isNotNull()
        if timed_out:  # after its partition's last match: in flight or stalled (the wait ran out)
            last_matched = F.max(F.when(has_s & has_t, F.col("s_offset"))).over(Window.partitionBy("src", "partition"))
            after_last = has_s & (F.col("s_offset") > F.coalesce(last_matched, F.lit(-1)))
        else:
            after_last = F.lit(False)
        kind = (F.when(has_s & has_t, "matched")
                .when(after_last & F.col("partition").isin(sorted(moving) or [-1]), "in_flight")
                .when(after_last, "stalled")
                .when(has_s, "missing")
                .when(F.col("partner").isNotNull(), "duplicates")
                .otherwise("extras"))
        # A duplicate counts for the source of the record it copies; extras have none.
        return pairs.select("src", "partition", "s_offset", "t_offset", "partner", kind.alias("kind"), *keep)

    def validate_group(self, group: Group, snap, source, per_src: dict[tuple[int, int], int] | None,
                       timed_out: bool, waited: float, target_hint: int = 0,
                       moving: set[int] = frozenset(), in_flight_bound: int | None = None) -> dict:
        """`moving`: the target partitions that took records during the wait; a
        record after its partition's last arrival is in flight only there
        (elsewhere it is stalled, and counts as missing). `per_src`: the source
        records per (src, partition), None: counted in the classification."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        spark, n = self.spark, self.sample_size
        marks = (self.kafka.watermarks(group.target_bootstrap, group.target_client, group.topic)
                 if self.kafka else None)
        target_parts = (None if marks is None else len(marks)) if self.kafka else self.target_partitions(group)
        # Shuffles sized to the data (unless given): small sorts per task, flat memory.
        spark.conf.set("spark.sql.shuffle.partitions", str(
            self.shuffle_partitions or tasks_for(target_hint + (sum(self.offsets_expected(group, snap).values())
                                                                if per_src is None else sum(per_src.values())),
                                                 self.cores)))
        # The target is read up to its end offsets now, before the sources' ends after the snapshot
        # (below): every copy read then has its source record in that later read.
        # (a transactional target: "latest" is its stable end)
        ends = None if marks is None or group.reads_committed else {p: high for p, (_, high) in marks.items()}
        kept = ends is None  # read (and kept on disk) now
        if self.kafka and target_parts is None:
            target = spark.createDataFrame([], "partition int, offset long, ts long, h1 long, h2 long")
        elif ends is not None:
            target = self.target_frame(group, hint=target_hint, ends=ends)
        else:  # the read itself fixes the ends
            target = self._persist(self.target_frame(group, hint=target_hint))
            target.count()
            if not self.kafka and self.since_ms is None:
                observed = target.agg(F.max("partition")).first()[0]
                target_parts = None if observed is None else int(observed) + 1

        mk = MATCH_KEY
        # Copies of records the sources took after the snapshot (applications go on writing while
        # the job runs) are no extras: set aside, checked by the next run. The newest copies of a
        # key go first (a copy of an identical record from before the snapshot stays).
        later = self.after_snapshot_frame(group, snap)
        after_snapshot = 0
        if later is not None:
            target = target if kept else self._persist(target)
            newest_first = Window.partitionBy(*mk).orderBy(F.col("offset").desc())
            marked = (target.withColumn("newest", F.row_number().over(newest_first))
                      .join(later.groupBy(*mk).agg(F.count("*").alias("later")), on=mk, how="left"))
            aside = F.col("later").isNotNull() & (F.col("newest") <= F.col("later"))
            after_snapshot = marked.where(aside).count()
            if after_snapshot:
                target = self._persist(marked.where(~aside).drop("newest", "later"))
        classified, counts = self.classify(source, target, timed_out, moving)
        if per_src is None:  # every source record is one of these kinds
            per_src = {}
            for r in counts:
                if r["kind"] in SOURCE_KINDS:
                    per_src[(r["src"], r["partition"])] = per_src.get((r["src"], r["partition"]), 0) + r["count"]
        target_records = sum(r["count"] for r in counts if r["kind"] in TARGET_KINDS)

        def total(kind_name, src_id=None):
            if kind_name == "missing":  # a stalled record is missing too (why: in its sample)
                return total("missing_only", src_id) + total("stalled", src_id)
            kind_name = "missing" if kind_name == "missing_only" else kind_name
            return sum(r["count"] for r in counts if r["kind"] == kind_name and (src_id is None or r["src"] == src_id))

        members = {m.src: m for m in group.members}
        samples: dict[str, list] = {}
        for name, kinds in (("missing", ["missing", "stalled"]), ("in_flight", ["in_flight"])):
            if total(name):
                rows = (classified.where(F.col("kind").isin(kinds)).orderBy("src", "partition", "s_offset")
                        .select("src", "partition", "s_offset", "kind").limit(n).collect())
                samples[name] = [{"flow": members[r["src"]].flow.name, "topic": members[r["src"]].topic,
                                  "partition": r["partition"], "source_offset": r["s_offset"],
                                  "target_offset": None, "why": why(r["kind"])} for r in rows]
        for name, source_col in (("duplicates", "partner"), ("extras", None)):
            if total(name):
                rows = (classified.where(F.col("kind") == name).orderBy("partition", "t_offset")
                        .select("partition", "t_offset", *([source_col] if source_col else [])).limit(n).collect())
                samples[name] = [{"topic": group.topic, "partition": r["partition"],
                                  "source_offset": r[source_col] if source_col else None,
                                  "target_offset": r["t_offset"]} for r in rows]

        pairs = classified.where(F.col("kind") == "matched").select("src", "partition", "s_offset", "t_offset")
        # The order is checked by a sort only where the copies are not their source records' offsets all
        # moved by one amount (merged sources, gaps of compaction or transactions, reordering).
        unshifted = sorted((r["src"] << 32) + r["partition"] for r in counts
                           if r["kind"] == "matched" and r["shift_min"] != r["shift_max"])
        ooo_by_src = {}
        if unshifted:
            ordered = (pairs.where(((F.col("src").cast("long") * (1 << 32)) + F.col("partition")).isin(unshifted))
                       .withColumn("prev", F.lag("s_offset").over(
                           Window.partitionBy("src", "partition").orderBy("t_offset"))))
            disorder = ordered.where(F.col("prev") > F.col("s_offset"))
            ooo_by_src = {r["src"]: r["count"] for r in disorder.groupBy("src").count().collect()}
        if ooo_by_src:
            rows = disorder.orderBy("src", "partition", "t_offset").limit(n).collect()
            samples["out_of_order"] = [{"flow": members[r["src"]].flow.name, "topic": members[r["src"]].topic,
                                        "partition": r["partition"], "source_offset": r["s_offset"],
                                        "previous_source_offset": r["prev"], "target_offset": r["t_offset"]}
                                       for r in rows]

        sources, lag = [], []
        partitions_ok = target_parts is not None
        for m in group.members:
            marks = snap[(m.flow.index, m.topic)]
            sources.append({"flow": m.flow.name, "topic": m.topic, "source_bootstrap": m.flow.source_bootstrap,
                            "partitions": len(marks), "window": {str(p): list(be) for p, be in marks.items()}})
            partitions_ok = partitions_ok and len(marks) == target_parts
            for p in sorted(marks):
                expected = per_src.get((m.src, p), 0)
                matched = sum(r["count"] for r in counts
                              if r["kind"] == "matched" and r["src"] == m.src and r["partition"] == p)
                lag.append({"flow": m.flow.name, "topic": m.topic, "partition": p, "expected": expected,
                            "matched": matched, "lag": expected - matched})

        failover = [entry for m in group.members if m.flow.checkpoints_topic
                    for entry in self.failover(group, m, pairs)]
        positions = [entry for m in group.members if m.flow.positions for entry in positions_outcome(
            m.flow.name, m.topic, group.topic, m.flow.positions,
            pairs.where(F.col("src") == m.src).select("partition", "s_offset", "t_offset"),
            snap[(m.flow.index, m.topic)])]
        report = {
            "target_bootstrap": group.target_bootstrap, "topic": group.topic,
            "flows": list(dict.fromkeys(m.flow.name for m in group.members)),
            "sources": sources, "target_partitions": target_parts, "partitions_ok": bool(partitions_ok),
            "waited_seconds": round(waited, 1), "timed_out": timed_out,
            "source_records": sum(per_src.values()), "target_records": target_records,
            "matched": total("matched"), "missing": total("missing"), "in_flight": total("in_flight"),
            # of the missing: after their partition's last arrival, on a target partition that took nothing
            "stalled": total("stalled"),
            "stalled_partitions": sorted({r["partition"] for r in counts if r["kind"] == "stalled"}),
            "in_flight_bound": in_flight_bound,
            "duplicates": total("duplicates"), "extras": total("extras"),
            "after_snapshot": after_snapshot,
            "out_of_order": sum(ooo_by_src.values()),
            "samples": samples, "lag": lag, "failover": failover, "positions": positions,
            "_per_src": {m.src: {"source_records": sum(v for (s, _), v in per_src.items() if s == m.src),
                                 "matched": total("matched", m.src), "missing": total("missing", m.src),
                                 "in_flight": total("in_flight", m.src), "duplicates": total("duplicates", m.src),
                                 "out_of_order": ooo_by_src.get(m.src, 0)}
                         for m in group.members},
        }
        return report

    def failover(self, group: Group, member: Member, pairs) -> list[dict]:
        from pyspark.sql import functions as F
        flow = member.flow
        cps = checkpoints_frame(self.spark, group.target_bootstrap, group.target_client, flow.checkpoints_topic)
        cps = cps.where(F.col("topic") == group.topic)
        if flow.groups:
            cps = cps.where(F.col("group").rlike("^(?:" + "|".join(f"(?:{g})" for g in flow.groups) + ")$"))
        if flow.groups_exclude:
            cps = cps.where(~F.col("group").rlike("^(?:" + "|".join(f"(?:{g})" for g in flow.groups_exclude)
                                                  + ")$"))
        latest = self._persist(latest_checkpoints(cps).select("group", "partition", "upstream_offset",
                                                              "downstream_offset"))
        per_group = (latest.groupBy("group")
                     .agg(F.count("*").alias("partitions"),
                          F.sort_array(F.collect_list(F.struct("partition", "upstream_offset",
                                                               "downstream_offset"))).alias("cps"))
                     .collect())
        mine = pairs.where(F.col("src") == member.src).select("partition", "s_offset", "t_offset")
        outcome = lost_and_reread(mine.join(F.broadcast(latest), "partition"), "group")
        entries = []
        for r in sorted(per_group, key=lambda r: r["group"]):
            lost_n, reread_n = outcome.get(r["group"], (0, 0))
            entries.append({"flow": flow.name, "consumer_group": r["group"], "topic": group.topic,
                            "checkpoints_topic": flow.checkpoints_topic, "partitions": r["partitions"],
                            "lost": lost_n, "reread": reread_n,
                            "checkpoints": [{"partition": c["partition"], "upstream_offset": c["upstream_offset"],
                                             "downstream_offset": c["downstream_offset"]} for c in r["cps"][:50]]})
        for regex in (flow.groups or ()) if flow.groups_required else ():
            if not any(re.fullmatch(regex, e["consumer_group"]) for e in entries):
                entries.append({"flow": flow.name, "consumer_group": regex, "topic": group.topic,
                                "checkpoints_topic": flow.checkpoints_topic, "partitions": 0, "lost": 0,
                                "reread": 0, "checkpoints": [], "unmatched_regex": True})
        return entries

    def run(self, snap=None) -> dict:
        started = time.time()
        config = self.config
        try:
            snap = snap if snap is not None else self.snapshot()
            # Targets that already hold their sources' offset ranges hold every source record: no wait, and
            # the sources are read once, in the classification (a pass and a kept copy less).
            sources, per_src = {}, {}
            offsets = {i: self.offsets_expected(group, snap) for i, group in enumerate(config.groups)}
            counts, waited, progress, behind = self.wait_for_targets(offsets, once=True)
            for i, group in enumerate(config.groups):
                sources[i], per_src[i] = self.source_frame(group, snap, keep=bool(behind)), None
            if behind:  # counted exactly, then waited for
                expected = {}
                for i in sources:
                    per_src[i] = {(r["src"], r["partition"]): r["count"]
                                  for r in sources[i].groupBy("src", "partition").count().collect()}
                    expected[i] = {}
                    for (_, partition), n in per_src[i].items():
                        expected[i][partition] = expected[i].get(partition, 0) + n
                counts, waited, progress, behind = self.wait_for_targets(expected, looked=progress)
            groups = []
            for i, group in enumerate(config.groups):
                self.log(f"validating {group.topic} on {group.target_bootstrap}")
                result = self.validate_group(group, snap, sources[i], per_src[i],
                                             timed_out=i in behind, waited=waited,
                                             target_hint=counts[i], moving=progress.moving(i),
                                             in_flight_bound=progress.in_flight_bound(i, waited, config.wait_seconds))
                purged, purged_per_src = purged_for_group(self, group)
                result.update(purged)
                for src, n in purged_per_src.items():
                    result["_per_src"][src]["purged"] = n
                result["failures"] = group_failures(result, config.tolerance)
                result["passed"] = not result["failures"]
                groups.append(result)
        finally:
            for frame in self.persisted:
                try:
                    frame.unpersist()
                except Exception:  # noqa: BLE001 - Spark already failed; keep that error, not this one
                    break
            if self.kafka:
                self.kafka.close()
        flows = []
        for flow in config.flows:
            topics = []
            for topic in flow.topics:
                gi, g = next((gi, g) for gi, g in enumerate(config.groups)
                             for m in g.members if m.flow.index == flow.index and m.topic == topic)
                m = next(m for m in g.members if m.flow.index == flow.index and m.topic == topic)
                topics.append({"topic": topic, "remote_topic": g.topic, "group": gi,
                               **groups[gi]["_per_src"][m.src]})
            flows.append({"name": flow.name, "topics": topics})
        for g in groups:
            g.pop("_per_src")
        failures = [f for g in groups for f in g["failures"]] + unproved_positions(config.flows, groups)
        checked = sum(g["source_records"] for g in groups)
        if checked < config.min_records:
            failures.append(f"checked {checked} records, fewer than min_records {config.min_records}")
        # A run that checked nothing is no pass: it says so (and fails only with min_records).
        status = "failed" if failures else "nothing-checked" if checked == 0 else "passed"
        window = {"seconds": config.window_seconds,
                  "since": None if self.since_ms is None else datetime.datetime.fromtimestamp(
                      self.since_ms / 1000, datetime.timezone.utc).isoformat(),
                  "since_ms": self.since_ms}
        return {"status": status, "passed": status == "passed",
                "exit_code": EXIT_FAILED if failures else EXIT_PASSED, "failures": failures,
                "records_checked": checked, "topics_checked": sum(len(f["topics"]) for f in flows),
                "min_records": config.min_records, "window": window,
                "started_at": datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(),
                "duration_seconds": round(time.time() - started, 1), "offsets_via": self.offsets_via,
                "wait_seconds": config.wait_seconds, "tolerance": config.tolerance,
                "groups": groups, "flows": flows}
