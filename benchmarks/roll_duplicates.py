"""Duplicates per planned roll on an at-least-once flow: the Connect workers, then
the brokers of the Connect group's own Kafka cluster, rolled through the engine
as a user rolls them (a setting changed, `pulumi up`), under steady traffic.

One local stack: `src` (1 broker) flows into `dst` (2 brokers) through a
2-worker Connect group next to dst. A producer writes distinct values to src at
`--rate` records/s for the whole run; a consumer counts every value that
arrives on dst. A round is a Connect roll (a worker setting changed), then a
roll of dst's brokers (a broker setting changed); after each roll, once every
record written before it ended is on dst, the roll's duplicates are the values
that arrived twice since the roll began. Rounds run for each `--modes` entry:
`before` runs the workers on the settings mirrorstack had before (flush every
10 s, Kafka's 5 s graceful task stop, scheduled.rebalance.max.delay.ms 0), `after` on today's defaults; a mode's
first rounds start with an unmeasured roll onto its settings. Between rolls, a
steady window gives each mode's cost: the workers' CPU and the records written
to Connect's offsets topic per second.

`--load N` runs each roll on a saturated machine, as in a full suite run: N
CPU-bound processes at niceness 0, each in its own session as a stack's JVM is
(with the kernel's autogroup the CPU is shared between sessions, not
processes), from just before the roll's `up` until its records are all on
dst; each roll reports the load's CPU and the machine's idle share meanwhile.
The steady windows run without it.

  flock /tmp/heavy.lock .venv/bin/python -m benchmarks.roll_duplicates [--rounds 2] [--modes before,after] \
      [--rate 200] [--load 0] [--out benchmarks/roll-duplicates-last-run.json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import yaml
from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.replication import machine
from mirrorstack.spark.spark_io import C1_ONLY
from tests.support.kafka_clients import create_topic
from tests.support.stacks import on_c1_only, stack_project

STACK = "aggregation"  # any stack file: the topology below replaces its own
TOPIC, REMOTE, PARTITIONS = "rolls", "src.rolls", 3
WORKERS = ["connect-dst-0", "connect-dst-1"]
SMALL = {"heap": "512m"}
TOPOLOGY = {
    "platform": "local",
    "clusters": {"src": {"brokers": 1, "resources": SMALL}, "dst": {"brokers": 2, "resources": SMALL}},
    "connect": {"dst": {"kafka": "dst", "workers": 2, "resources": SMALL}},
    "flows": [{"source": "src", "target": "dst", "topics": [TOPIC], "heartbeats": False, "checkpoints": False}],
}
# The workers' settings before planned rolls were made to commit (Kafka's own graceful stop).
MODES = {"before": {"offset.flush.interval.ms": "10000", "task.shutdown.graceful.timeout.ms": "5000",
                    "scheduled.rebalance.max.delay.ms": "0"},
         "after": {}}
# What the workers log about a task they stop, cancel or take over (regular expressions): counted per roll.
MARKERS = {"task starts": "Starting task", "graceful stop failed": r"Graceful stop of task \S+ failed",
           "final commit skipped": "Skipping final offset commit", "commit failed": "Failed to commit offsets",
           "offsets flush failed": "Failed to flush offsets", "offsets flush timed out": "Timed out waiting to flush",
           "coordinator lost, tasks revoked": "Broker coordinator was unreachable"}


# One busy process of a load: it ends by itself once the benchmark is gone (killed before it could stop it).
BUSY = "import os, sys\nparent = int(sys.argv[1])\nwhile os.getppid() == parent:\n    for _ in range(1000000): pass\n"


def _idle_and_total_ticks() -> tuple[int, int]:
    fields = [int(f) for f in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return fields[3] + fields[4], sum(fields)  # idle + iowait, all


class CpuLoad:
    """`n` CPU-bound processes while in the `with` block, stopped by PID; what they took is in `measured`."""

    def __init__(self, n: int):
        self.n, self.children, self.measured = n, [], {}

    def __enter__(self) -> CpuLoad:
        self.idle_total, self.started = _idle_and_total_ticks(), time.monotonic()
        for _ in range(self.n):
            self.children.append(subprocess.Popen([sys.executable, "-c", BUSY, str(os.getpid())],
                                                  stdin=subprocess.DEVNULL, start_new_session=True))
        return self

    def __exit__(self, *_exc) -> None:
        cpu, took = sum(_tree_cpu_seconds(child.pid) for child in self.children), time.monotonic() - self.started
        idle, total = (now - then for now, then in zip(_idle_and_total_ticks(), self.idle_total))
        for child in self.children:
            child.kill()
        for child in self.children:
            child.wait(30)
        self.children = []
        self.measured = {"load_processes": self.n, "load_cpu_per_second": round(cpu / took, 2),
                         "machine_idle_share": round(idle / total, 3) if total else None}


class Traffic(threading.Thread):
    """Distinct values `<n>` to src at a steady rate, acks=all, idempotent."""

    def __init__(self, bootstrap: str, rate: int):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5})
        self.pause, self.sent, self.delivered = 1 / rate, 0, 0
        self.stop = threading.Event()

    def _on_delivery(self, err, _msg):
        if err is None:
            self.delivered += 1

    def run(self):
        next_at = time.monotonic()
        while not self.stop.is_set():
            self.producer.produce(TOPIC, value=str(self.sent).encode(), on_delivery=self._on_delivery)
            self.sent += 1
            self.producer.poll(0)
            next_at += self.pause
            time.sleep(max(0.0, next_at - time.monotonic()))
        self.producer.flush(60)


class Arrivals(threading.Thread):
    """Every value on dst's remote topic, counted, read from the beginning."""

    def __init__(self, bootstrap: str):
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "roll-duplicates",
                                  "enable.auto.commit": False})
        self.seen: Counter[int] = Counter()
        self.lock, self.stop = threading.Lock(), threading.Event()

    def run(self):
        self.consumer.assign([TopicPartition(REMOTE, p, 0) for p in range(PARTITIONS)])
        while not self.stop.is_set():
            for message in self.consumer.consume(5000, timeout=0.5):
                if message.error() is None:
                    with self.lock:
                        self.seen[int(message.value())] += 1
        self.consumer.close()

    def duplicates(self) -> int:
        with self.lock:
            return sum(n - 1 for n in self.seen.values())

    def missing_below(self, bound: int) -> int:
        with self.lock:
            return sum(1 for v in range(bound) if v not in self.seen)


def wait_caught_up(traffic: Traffic, arrivals: Arrivals, timeout: float = 300) -> float:
    """Until every value written so far is on dst; returns the seconds waited."""
    bound, started = traffic.delivered, time.monotonic()
    while (missing := arrivals.missing_below(bound)) > 0:
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{missing} of the first {bound} records not on dst after {timeout:.0f} s")
        time.sleep(0.5)
    return time.monotonic() - started


def _services(project) -> dict[str, dict]:
    resources = json.loads(project.run("stack", "export").stdout)["deployment"]["resources"]
    return {r["outputs"]["name"]: r["outputs"] for r in resources
            if r.get("outputs", {}).get("pid") and r["outputs"].get("argv")}


def _tree_cpu_seconds(root: int) -> float:
    """utime + stime of `root` and every descendant (a keeper and its JVM)."""
    parents, ticks = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            raw = stat.read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2:].split()
        pid = int(stat.parent.name)
        parents[pid], ticks[pid] = int(fields[1]), int(fields[11]) + int(fields[12])
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += ticks.get(pid, 0)
        stack.extend(child for child, parent in parents.items() if parent == pid)
    return total / os.sysconf("SC_CLK_TCK")


def _offsets_topic_records(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "roll-duplicates-offsets"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions)
    finally:
        consumer.close()


def _wait_for_topic(bootstrap: str, topic: str, timeout: float = 180) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "roll-duplicates-topics"})
    try:
        deadline = time.monotonic() + timeout
        while topic not in consumer.list_topics(timeout=10).topics:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic} not created on dst within {timeout:.0f} s")
            time.sleep(0.5)
    finally:
        consumer.close()


def _connect_offsets_topic(bootstrap: str) -> str:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "roll-duplicates-topics"})
    try:
        return next(t for t in consumer.list_topics(timeout=10).topics if t.endswith("-offsets") and not t.startswith("_"))
    finally:
        consumer.close()


def steady_cost(project, dst: str, seconds: float) -> dict:
    """The workers' CPU and the offsets topic's writes over `seconds` of steady traffic."""
    pids = [int(outs["pid"]) for name, outs in _services(project).items() if name in WORKERS]
    topic = _connect_offsets_topic(dst)
    cpu, records, started = sum(map(_tree_cpu_seconds, pids)), _offsets_topic_records(dst, topic), time.monotonic()
    time.sleep(seconds)  # a measuring window, not a wait for a condition
    took = time.monotonic() - started
    return {"worker_cpu_per_second": round((sum(map(_tree_cpu_seconds, pids)) - cpu) / took, 3),
            "offset_records_per_second": round((_offsets_topic_records(dst, topic) - records) / took, 2)}


def _log_positions(project) -> dict[str, int]:
    return {w: (project.local_dir / w / "service.log").stat().st_size for w in WORKERS}


def _markers_since(project, positions: dict[str, int]) -> dict[str, int]:
    counts = Counter()
    for worker, position in positions.items():
        with open(project.local_dir / worker / "service.log", "rb") as log:
            log.seek(position)
            for line in log.read().decode(errors="replace").splitlines():
                counts.update(name for name, marker in MARKERS.items() if re.search(marker, line))
    return dict(counts)


class Rolls:
    """The stack and its traffic; each `roll` edits the topology and runs `up`."""

    def __init__(self, project, traffic: Traffic, arrivals: Arrivals, load: int = 0):
        self.project, self.traffic, self.arrivals, self.count, self.load = project, traffic, arrivals, 0, load

    def edit(self, change) -> None:
        path = self.project.dir / "stacks" / f"Pulumi.{STACK}.yaml"
        document = yaml.safe_load(path.read_text())
        change(document["config"]["mirrorstack:topology"])
        path.write_text(yaml.safe_dump(document))

    def roll(self, kind: str, mode: str) -> dict:
        """One roll: a new worker (kind "connect") or broker ("brokers") setting, with the mode's worker settings."""
        self.count += 1
        marker = str(30000 + self.count)

        def change(topology):
            group = topology["connect"]["dst"]
            group["settings"] = {**MODES[mode], "metrics.sample.window.ms": group.get("settings", {}).get(
                "metrics.sample.window.ms", "30000")}
            if kind == "connect":
                group["settings"]["metrics.sample.window.ms"] = marker
            else:
                topology["clusters"]["dst"].setdefault("settings", {})["connections.max.idle.ms"] = str(600000 + self.count)
        wait_caught_up(self.traffic, self.arrivals)
        before, positions, sent = self.arrivals.duplicates(), _log_positions(self.project), self.traffic.sent
        with CpuLoad(self.load) as load:
            self.edit(change)
            started = time.monotonic()
            self.project.run("up", "--yes", "--skip-preview", timeout=1200)
            took = time.monotonic() - started
            caught_up = wait_caught_up(self.traffic, self.arrivals)
        return {"kind": kind, "mode": mode, "up_seconds": round(took, 1), "records_during_roll": self.traffic.sent - sent,
                "duplicates": self.arrivals.duplicates() - before, "caught_up_after_seconds": round(caught_up, 1),
                "worker_log": _markers_since(self.project, positions), **load.measured}


def summary(rolls: list[dict], costs: dict[str, list[dict]], modes: list[str]) -> dict:
    out = {}
    for kind in ("connect", "brokers"):
        per_mode = {m: [r["duplicates"] for r in rolls if r["kind"] == kind and r["mode"] == m] for m in modes}
        logs = {m: [r["worker_log"] for r in rolls if r["kind"] == kind and r["mode"] == m] for m in modes}
        out[kind] = {m: {"duplicates": d, "mean": statistics.mean(d), "spread": max(d) - min(d), "worker_log": logs[m]}
                     for m, d in per_mode.items() if d}
        if "before" in out[kind] and "after" in out[kind] and out[kind]["before"]["mean"]:
            out[kind]["after_over_before"] = round(out[kind]["after"]["mean"] / out[kind]["before"]["mean"], 3)
    out["cost"] = {m: {key: statistics.mean(c[key] for c in costs[m]) for key in costs[m][0]} for m in modes if costs[m]}
    return out


def publish(report: dict, out: Path | None) -> None:
    """The report on stdout, and in `out` when given (benchmarks/roll-duplicates-last-run.json)."""
    text = json.dumps(report, indent=2) + "\n"
    print(text, end="")
    if out is not None:
        out.write_text(text)


class Stopped(Exception):
    """SIGTERM, raised where the benchmark is, so that it cleans up."""


def _stopped(*_args) -> None:
    raise Stopped("SIGTERM")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="rounds per mode (a Connect roll, then a broker roll)")
    parser.add_argument("--modes", default="before,after", help=f"worker settings, in order: {', '.join(MODES)}")
    parser.add_argument("--rate", type=int, default=200, help="records/s written to src")
    parser.add_argument("--steady-seconds", type=float, default=15, help="cost window before each round")
    parser.add_argument("--load", type=int, default=0, help="CPU-bound processes running during each roll")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    modes = args.modes.split(",")
    # The stack's JVMs on C1 only, as the suite's: short-lived and CPU-bound on two cores.
    os.environ["JDK_JAVA_OPTIONS"] = f"{C1_ONLY} {os.environ.get('JDK_JAVA_OPTIONS', '')}".strip()
    report = {"machine": machine(), "rate": args.rate, "load": args.load, "modes": {m: MODES[m] for m in modes},
              "rolls": [], "cost": {m: [] for m in modes}}
    signal.signal(signal.SIGTERM, _stopped)  # `timeout`: stop the load, destroy the stack, keep what was measured
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mirrorstack-rolls-") as tmp, \
            stack_project(STACK, Path(tmp), topology=on_c1_only(json.loads(json.dumps(TOPOLOGY)))) as project:
        try:
            path = project.dir / "stacks" / f"Pulumi.{STACK}.yaml"
            document = yaml.safe_load(path.read_text())
            document["config"]["mirrorstack:topology"]["connect"]["dst"]["settings"] = {
                **MODES[modes[0]], "metrics.sample.window.ms": "30000"}
            path.write_text(yaml.safe_dump(document))
            project.run("up", "--yes", "--skip-preview", timeout=1200)
            outputs = project.outputs()
            src, dst = outputs["clusters"]["src"], outputs["clusters"]["dst"]
            create_topic(src, TOPIC, PARTITIONS, 1)
            traffic = Traffic(src, args.rate)
            traffic.start()
            _wait_for_topic(dst, REMOTE)
            arrivals = Arrivals(dst)
            arrivals.start()
            rolls = Rolls(project, traffic, arrivals, args.load)
            for i, mode in enumerate(modes):
                if i:  # onto the mode's settings: its stops still run the previous mode's
                    rolls.roll("connect", mode)
                for round_no in range(args.rounds):
                    wait_caught_up(traffic, arrivals)
                    report["cost"][mode].append(steady_cost(project, dst, args.steady_seconds))
                    for kind in ("connect", "brokers"):
                        roll = {**rolls.roll(kind, mode), "round": round_no + 1}
                        report["rolls"].append(roll)
                        print(f"{mode} round {roll['round']} {kind} roll: {roll['duplicates']} duplicates of "
                              f"{roll['records_during_roll']} records written during it ({roll['up_seconds']} s); "
                              f"workers: {roll['worker_log']}; load: {roll['load_cpu_per_second']} cores, "
                              f"machine idle {roll['machine_idle_share']}", flush=True)
            traffic.stop.set(), traffic.join(90)
            wait_caught_up(traffic, arrivals)
            arrivals.stop.set(), arrivals.join(30)
            report["records"] = traffic.delivered
            report["missing"] = arrivals.missing_below(traffic.delivered)
        except Exception as exc:  # keep the rolls measured so far
            report["error"] = repr(exc)[:2000]
        finally:
            project.run("destroy", "--yes", "--skip-preview", timeout=900, check=False)
    report["seconds"] = round(time.monotonic() - started)
    if report["rolls"]:
        report["summary"] = summary(report["rolls"], report["cost"], modes)
    publish(report, args.out)


if __name__ == "__main__":
    main()
