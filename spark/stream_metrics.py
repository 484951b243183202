"""What the continuous validation exports: the ledgers' latest figures (streaming.py hands them
over after each micro-batch) summed per target topic, served on /metrics for Prometheus, and a
log line for each record newly counted missing, naming its source topic, partition and offset."""
from __future__ import annotations

import threading
import time
from typing import Callable

from .config import Config
from .stream_match import LATENCY_BUCKETS

PREFIX = "mirrorstack_continuous_"
COUNTERS = {"confirmed": "source records whose copy arrived on the target",
            "missing": "source records whose copy did not arrive within the window",
            "duplicates": "copies of a record that had arrived already (within the window)",
            "extras": "target records with no source record within the window"}


class Exporter:
    def __init__(self, config: Config, log: Callable[[str], None]):
        self.config = config
        self.log = log
        self.latest: dict[tuple[int, int], dict] = {}  # (group, partition) -> its ledger's last figures
        self.seen_missing: set[tuple] = set()
        self.last_batch = 0.0
        self._lock = threading.Lock()

    def take(self, rows: list[dict]) -> None:
        with self._lock:
            for row in rows:
                where = (row["g"], row["partition"])
                self.latest[where] = row
                for src, offset, ts in row.get("missing_samples") or []:
                    if (*where, src, offset) not in self.seen_missing:
                        self.seen_missing.add((*where, src, offset))
                        group = self.config.groups[row["g"]]
                        member = group.members[src]
                        self.log(f"missing: {member.label} partition {row['partition']} offset {offset} "
                                 f"(timestamp {ts}) has no copy on {group.topic} within the window")
            self.last_batch = time.time()

    def labels(self, g: int) -> tuple[str, str]:
        group = self.config.groups[g]
        return group.members[0].flow.target_alias or "", group.topic

    def figures(self) -> dict[tuple[str, str], dict]:
        """Per (target alias, target topic): the counters and latencies summed, RPO's age the largest."""
        with self._lock:
            rows = list(self.latest.values())
        out: dict[tuple[str, str], dict] = {}
        for row in rows:
            into = out.setdefault(self.labels(row["g"]), {
                **{k: 0 for k in COUNTERS}, "rpo_records": 0, "rpo_seconds": 0.0, "latency_sum": 0.0,
                "latency_max": 0.0, "buckets": [0] * (len(LATENCY_BUCKETS) + 1)})
            for key in (*COUNTERS, "rpo_records", "latency_sum"):
                into[key] += row[key]
            into["rpo_seconds"] = max(into["rpo_seconds"], row["rpo_seconds"])
            into["latency_max"] = max(into["latency_max"], row["latency_max"])
            into["buckets"] = [a + b for a, b in zip(into["buckets"], row["buckets"])]
        return out

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
        names = ["target", "topic"]
        figures = self.figures()
        families = {k: CounterMetricFamily(f"{PREFIX}{k}_records", text, labels=names) for k, text in COUNTERS.items()}
        rpo_records = GaugeMetricFamily(f"{PREFIX}rpo_records", "source records not yet on the target", labels=names)
        rpo_seconds = GaugeMetricFamily(f"{PREFIX}rpo_seconds", "age of the oldest source record not yet on the "
                                        "target, by its timestamp (0: none)", labels=names)
        latency = HistogramMetricFamily(f"{PREFIX}latency_seconds", "from a source record's timestamp to the "
                                        "validator reading its copy", labels=names)
        latency_max = GaugeMetricFamily(f"{PREFIX}latency_max_seconds", "the largest latency of the last batch",
                                        labels=names)
        for labels, f in sorted(figures.items()):
            for key, family in families.items():
                family.add_metric(list(labels), f[key])
            rpo_records.add_metric(list(labels), f["rpo_records"])
            rpo_seconds.add_metric(list(labels), f["rpo_seconds"])
            cumulative, running = [], 0
            for bound, count in zip([*map(str, LATENCY_BUCKETS), "+Inf"], f["buckets"]):
                running += count
                cumulative.append((bound, running))
            latency.add_metric(list(labels), cumulative, f["latency_sum"])
            latency_max.add_metric(list(labels), f["latency_max"])
        last = GaugeMetricFamily(f"{PREFIX}last_batch_timestamp_seconds", "when the last micro-batch ended")
        last.add_metric([], self.last_batch)
        yield from (*families.values(), rpo_records, rpo_seconds, latency, latency_max, last)

    def serve(self, host: str, port: int) -> None:
        from prometheus_client import start_http_server
        from prometheus_client.registry import CollectorRegistry
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        start_http_server(port, addr=host, registry=registry)
