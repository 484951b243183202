"""The continuous validation's ledger of one source partition and its copy: which source records
are not yet on the target, which target records have no source record yet, what was confirmed,
missing, duplicated, and how late each copy came. Pure Python, no Spark: the streaming job
(streaming.py) keeps one ledger per (pair, partition) in Spark's state store, as JSON.

A record is its match key (timestamp and two digests, spark_io.MATCH_KEY): MM2 keeps a record's
partition, timestamp, key, value and headers. What the ledger holds is bounded by the window:
a source record not matched within `window` seconds of being read is counted missing and
dropped, a target record without a source record for as long is counted extra and dropped, and a
confirmed key is remembered that long to tell a duplicate copy."""
from __future__ import annotations

import bisect
import json

# Seconds from a source record's timestamp to its copy's arrival on the target (Ledger.arrival).
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
MISSING_SAMPLES = 20  # the last missing records, named by offset, per partition
TOTALS = ("confirmed", "missing", "duplicates", "extras")


class Ledger:
    def __init__(self, state: dict | None = None):
        state = state or {}
        # key "ts:h1:h2" -> [source topic's number, offset, when read] of each record not yet matched
        self.pending: dict[str, list[list[float]]] = state.get("pending", {})
        # key -> when its copies landed (Ledger.arrival), read with no source record read yet
        self.early: dict[str, list[float]] = state.get("early", {})
        # key -> when its last source record's copy landed (a later copy is a duplicate)
        self.confirmed_keys: dict[str, float] = state.get("confirmed_keys", {})
        self.totals: dict[str, int] = {k: 0 for k in TOTALS} | state.get("totals", {})
        self.buckets: list[int] = state.get("buckets", [0] * (len(LATENCY_BUCKETS) + 1))
        self.latency_sum: float = state.get("latency_sum", 0.0)
        self.latency_max: float = state.get("latency_max", 0.0)  # the largest since the last report
        self.missing_samples: list[list[int]] = state.get("missing_samples", [])  # [src, offset, timestamp ms]
        self.seen_at: float | None = state.get("seen_at")  # the batch before: what it read was on the target then
        # per side ("t" the target, else the source's number): [highest offset read, newest timestamp read]
        self.read_to: dict[str, list[int]] = state.get("read_to", {})

    def to_json(self) -> str:
        return json.dumps({"pending": self.pending, "early": self.early, "confirmed_keys": self.confirmed_keys,
                           "totals": self.totals, "buckets": self.buckets, "latency_sum": self.latency_sum,
                           "latency_max": self.latency_max, "missing_samples": self.missing_samples,
                           "seen_at": self.seen_at, "read_to": self.read_to},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> "Ledger":
        return cls(json.loads(text) if text else None)

    @classmethod
    def fresh(cls, now: float, trigger: float) -> "Ledger":
        """The ledger of a partition first read by the batch of `now`: its batch before is taken to be
        one trigger earlier, as when batches keep time, so the copies of a topic made while the
        validator runs are timed like any others, not as late as the batch that first read them."""
        ledger = cls()
        ledger.seen(now - trigger)
        return ledger

    def arrival(self, ts_ms: int, now: float) -> float:
        """When a copy first read by the batch of `now` landed: after the batch before fetched its offsets
        (`seen_at`), so the middle of that interval (not before its record's timestamp): within half the
        interval, and the mean unbiased when copies land evenly, however late the batches run. With no
        batch before, `now`: an upper bound (a new ledger is given one: Ledger.fresh)."""
        if self.seen_at is None:
            return now
        return min(max((self.seen_at + now) / 2, ts_ms / 1000), now)

    def take(self, source: list[tuple[int, int, int, int, int]], target: list[tuple[int, int, int, int, int]],
             now: float) -> None:
        """One batch read at `now` (seconds, when it fetched its offsets): rows as (src, offset, ts ms, h1,
        h2), `src` the number of the flow (the source topic) feeding this target. The source's first, so
        a record and its copy read in one batch match. Call `seen(now)` after each batch, with rows or not."""
        for src, offset, ts, h1, h2 in source:
            if self._again(str(src), offset, ts):
                continue
            key = f"{ts}:{h1}:{h2}"
            copies = self.early.get(key)
            if copies:
                self._confirm(key, ts, copies.pop(0))
                if not copies:
                    del self.early[key]
            else:
                self.pending.setdefault(key, []).append([src, offset, now])
        for _src, offset, ts, h1, h2 in target:
            if self._again("t", offset, ts):
                continue
            key = f"{ts}:{h1}:{h2}"
            waiting = self.pending.get(key)
            if waiting:
                waiting.pop(0)
                if not waiting:
                    del self.pending[key]
                self._confirm(key, ts, self.arrival(ts, now))
            elif key in self.confirmed_keys:
                self.totals["duplicates"] += 1
            else:
                self.early.setdefault(key, []).append(self.arrival(ts, now))

    def _again(self, side: str, offset: int, ts: int) -> bool:
        """A record read before, now read again: Spark's Kafka source reads a partition from its start once
        more when a broker that had just restarted answered without it (gone, then new to Spark). Its
        offset and its timestamp are both at or below what this side read; a topic made again starts at
        offset 0 with newer records, which count."""
        high = self.read_to.get(side)
        if high is not None and offset <= high[0] and ts <= high[1]:
            return True
        self.read_to[side] = [max(offset, high[0]), max(ts, high[1])] if high else [offset, ts]
        return False

    def seen(self, now: float) -> None:
        self.seen_at = now

    def _confirm(self, key: str, ts_ms: int, arrived: float) -> None:
        latency = max(0.0, arrived - ts_ms / 1000)
        self.totals["confirmed"] += 1
        self.confirmed_keys[key] = arrived
        self.buckets[bisect.bisect_left(LATENCY_BUCKETS, latency)] += 1
        self.latency_sum += latency
        self.latency_max = max(self.latency_max, latency)

    def expire(self, now: float, window: float) -> None:
        """What waited longer than `window` seconds: a source record is missing, a target record
        extra. (Both sides start at one timestamp, so a copy's source record is read too.)"""
        limit = now - window
        for key in list(self.pending):
            kept = []
            for src, offset, read_at in self.pending[key]:
                if read_at < limit:
                    self.totals["missing"] += 1
                    self.missing_samples = (self.missing_samples + [[int(src), int(offset), int(key.split(":")[0])]])[
                        -MISSING_SAMPLES:]
                else:
                    kept.append([src, offset, read_at])
            if kept:
                self.pending[key] = kept
            else:
                del self.pending[key]
        for key in list(self.early):
            kept = [t for t in self.early[key] if t >= limit]
            self.totals["extras"] += len(self.early[key]) - len(kept)
            if kept:
                self.early[key] = kept
            else:
                del self.early[key]
        self.confirmed_keys = {k: t for k, t in self.confirmed_keys.items() if t >= limit}

    def rpo(self, now: float) -> tuple[int, float]:
        """(source records not yet on the target, age in seconds of the oldest of them by its timestamp)."""
        if not self.pending:
            return 0, 0.0
        oldest = min(int(key.split(":")[0]) for key in self.pending)
        return sum(len(v) for v in self.pending.values()), max(0.0, now - oldest / 1000)

    def rpo_by_source(self, now: float) -> list[list[float]]:
        """rpo() per source topic feeding this partition (each its flow's): [[src, records, age], ...]."""
        by_src: dict[int, list[float]] = {}
        for key, waiting in self.pending.items():
            ts = int(key.split(":")[0])
            for src, _offset, _read_at in waiting:
                into = by_src.setdefault(int(src), [0, ts])
                into[0] += 1
                into[1] = min(into[1], ts)
        return [[src, records, max(0.0, now - oldest / 1000)] for src, (records, oldest) in sorted(by_src.items())]

    def report(self, now: float) -> dict:
        """The cumulative figures, then the largest latency is reset for the next report."""
        records, age = self.rpo(now)
        out = {**self.totals, "rpo_records": records, "rpo_seconds": age, "rpo_by_source": self.rpo_by_source(now),
               "buckets": list(self.buckets),
               "latency_sum": self.latency_sum, "latency_max": self.latency_max,
               "missing_samples": [list(s) for s in self.missing_samples]}
        self.latency_max = 0.0
        return out
