"""What the continuous validation exports: the ledgers' latest figures (streaming.py hands them
over after each micro-batch) summed per target topic, served on /metrics for Prometheus, and a
log line for each record newly counted missing, naming its source topic, partition and offset."""
from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Callable

from .stream_match import LATENCY_BUCKETS

PREFIX = "mirrorstack_continuous_"
COUNTERS = {"confirmed": "source records whose copy arrived on the target",
            "missing": "source records whose copy did not arrive within the window",
            "duplicates": "copies of a record that had arrived already (within the window)",
            "extras": "target records with no source record within the window"}


class Exporter:
    """`plan`: stream_plan.Plan, which names each target cluster and flow."""

    def __init__(self, plan, log: Callable[[str], None]):
        self.plan = plan
        self.log = log
        self.latest: dict[tuple[int, str, int], dict] = {}  # (target cluster, topic, partition) -> last figures
        self.seen_missing: set[tuple] = set()
        self.last_batch = 0.0
        self.running = False  # the query has reported progress (/healthz)
        self._lock = threading.Lock()

    def follow(self, progress: Callable[[], str | None], stopping: threading.Event, every: float = 0.5) -> None:
        """`progress()`: when Spark's query last reported progress (ISO time; None before its first): a batch
        run, or its report every 10 s while idle. It is `running` from the first, and `last_batch` follows
        them (an idle validator is not a stalled one)."""
        while not stopping.wait(every):
            try:
                at = progress()
            except Exception:  # the query is ending
                return
            if at:
                self.running = True
                self.last_batch = max(self.last_batch, datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp())

    def take(self, rows: list[dict]) -> None:
        with self._lock:
            for row in rows:
                where = (row["c"], row["topic"], row["partition"])
                self.latest[where] = row
                for src, offset, ts in row.get("missing_samples") or []:
                    if (*where, src, offset) not in self.seen_missing:
                        self.seen_missing.add((*where, src, offset))
                        flow = self.plan.flows[src]
                        self.log(f"missing: {flow.name}:{self.plan.upstream(src, row['topic'])} partition "
                                 f"{row['partition']} offset {offset} (timestamp {ts}) has no copy on "
                                 f"{row['topic']} within the window")
            self.last_batch = time.time()

    def figures(self) -> dict[tuple[str, str], dict]:
        """Per (target alias, target topic): the counters and latencies summed, and per flow feeding it
        (`rpo`: flow -> [records, age]) the records not yet there and the age of the oldest. A flow
        with no topic seen yet has its RPO at 0 under topic "" (its alert rule sees a series)."""
        with self._lock:
            rows = list(self.latest.values())
        out: dict[tuple[str, str], dict] = {}
        seen_flows = set()
        for row in rows:
            into = out.setdefault((self.plan.target_aliases[row["c"]], row["topic"]), {
                **{k: 0 for k in COUNTERS}, "latency_sum": 0.0, "latency_max": 0.0,
                "buckets": [0] * (len(LATENCY_BUCKETS) + 1), "rpo": {}})
            for key in (*COUNTERS, "latency_sum"):
                into[key] += row[key]
            into["latency_max"] = max(into["latency_max"], row["latency_max"])
            into["buckets"] = [a + b for a, b in zip(into["buckets"], row["buckets"])]
            for f in self.plan.claims(row["c"], row["topic"]):
                into["rpo"].setdefault(self.plan.flows[f].name, [0, 0.0])
                seen_flows.add(f)
            for src, records, age in row.get("rpo_by_source") or []:
                rpo = into["rpo"][self.plan.flows[int(src)].name]
                rpo[0] += int(records)
                rpo[1] = max(rpo[1], age)
        for f, flow in enumerate(self.plan.flows):
            if f not in seen_flows:
                baseline = out.setdefault((self.plan.target_aliases[self.plan.target_of[f]], ""), {"rpo": {}})
                baseline["rpo"][flow.name] = [0, 0.0]
        return out

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
        names = ["target", "topic"]
        figures = self.figures()
        families = {k: CounterMetricFamily(f"{PREFIX}{k}_records", text, labels=names) for k, text in COUNTERS.items()}
        rpo_records = GaugeMetricFamily(f"{PREFIX}rpo_records", "the flow's source records not yet on the target",
                                        labels=[*names, "flow"])
        rpo_seconds = GaugeMetricFamily(f"{PREFIX}rpo_seconds", "age of the flow's oldest source record not yet on "
                                        "the target, by its timestamp (0: none)", labels=[*names, "flow"])
        latency = HistogramMetricFamily(f"{PREFIX}latency_seconds", "from a source record's timestamp to the "
                                        "validator reading its copy", labels=names)
        latency_max = GaugeMetricFamily(f"{PREFIX}latency_max_seconds", "the largest latency of the last batch",
                                        labels=names)
        for labels, f in sorted(figures.items()):
            for flow, (records, age) in sorted(f["rpo"].items()):
                rpo_records.add_metric([*labels, flow], records)
                rpo_seconds.add_metric([*labels, flow], age)
            if "buckets" not in f:  # only a flow's RPO baseline
                continue
            for key, family in families.items():
                family.add_metric(list(labels), f[key])
            cumulative, running = [], 0
            for bound, count in zip([*map(str, LATENCY_BUCKETS), "+Inf"], f["buckets"]):
                running += count
                cumulative.append((bound, running))
            latency.add_metric(list(labels), cumulative, f["latency_sum"])
            latency_max.add_metric(list(labels), f["latency_max"])
        last = GaugeMetricFamily(f"{PREFIX}last_batch_timestamp_seconds",
                                 "when the query last made progress: a batch, or Spark's report every 10 s while idle")
        last.add_metric([], self.last_batch)
        yield from (*families.values(), rpo_records, rpo_seconds, latency, latency_max, last)

    def serve(self, host: str, port: int) -> None:
        """/metrics (Prometheus's text format), and /healthz: 200 once the query runs, else 503."""
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                if self.path.startswith("/metrics"):
                    code, kind, body = 200, CONTENT_TYPE_LATEST, generate_latest(registry)
                elif self.path.startswith("/healthz"):
                    code, kind = (200 if exporter.running else 503), "text/plain; charset=utf-8"
                    body = b"running\n" if exporter.running else b"starting: Spark's query has not begun\n"
                else:
                    code, kind, body = 404, "text/plain; charset=utf-8", b"not found\n"
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # scrapes are not news
                pass

        server = ThreadingHTTPServer((host, port), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
