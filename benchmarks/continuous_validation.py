"""The continuous validation's cost: CPU and memory of `mirrorstack.spark.streaming` on local[2]
at several steady rates, against the same validator idle (the baseline, measured in the same
run), then memory over a long run at one rate, which must stay flat (its state is bounded by
the window, not by the history).

A writer thread puts R records a second into a 4-partition source topic and, as MM2 would, the
same record (partition, timestamp, key, value, headers) into its remote topic at once: the copy
is not what is measured. CPU: user+system seconds of the validator's process tree (its driver
JVM and Python workers, with reaped children) per second of each phase, read from /proc over
equal intervals, whose median and spread are reported. Memory: the tree's resident set.
At the end the validator's own figures must show every record confirmed and none missing.

  .venv/bin/python -m benchmarks.continuous_validation [--rates 200 1000 3000] [--phase-seconds 180]
      [--long-rate 1000] [--long-minutes 30] [--out report.json] [--quick]

The long run's samples also break the resident set down: the Python driver, the driver JVM (and its
heap committed and in use, from jcmd) and the Python workers. `--native-memory` turns on the driver
JVM's Native Memory Tracking and adds, every minute of the long run, what each of its categories
has committed (`jcmd VM.native_memory summary`): which part of the JVM's resident set grows.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.validation import _process_table, _tree_kib
from mirrorstack import toolchain
from tests.support.kafka_clients import create_topic
from tests.support.ports import free_ports
from tests.support.processes import environment
from tests.support.services import KafkaCluster

PARTITIONS = 4
ROOT = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")
WINDOW, TRIGGER = 60, 2


class Writer(threading.Thread):
    """R records a second into `orders` and their copies into `edge.orders`, in 0.1 s steps."""

    def __init__(self, bootstrap: str):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "1"})
        self.rate = 0
        self.written = 0
        self.running = True

    def run(self) -> None:
        step, owed, last = 0.1, 0.0, time.monotonic()
        while self.running:
            now = time.monotonic()
            owed += self.rate * (now - last)
            last = now
            for _ in range(int(owed)):
                n = self.written
                ts = int(time.time() * 1000)
                fields = {"key": f"k{n}".encode(), "value": f"value-{n}-{'x' * 80}".encode(),
                          "partition": n % PARTITIONS, "timestamp": ts, "headers": [("n", str(n).encode())]}
                self.producer.produce("orders", **fields)
                self.producer.produce("edge.orders", **fields)
                self.written += 1
            owed -= int(owed)
            self.producer.poll(0)
            time.sleep(max(0.0, step - (time.monotonic() - now)))
        assert self.producer.flush(60) == 0


def cpu_seconds(root: int) -> float:
    """User+system CPU of `root` (with its reaped children) and of its live descendants."""
    children, _ = _process_table()
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15 if pid == root else 13]) / TICKS  # utime stime [cutime cstime]
        todo.extend(children.get(pid, []))
    return total


def rss_mib(root: int) -> float:
    children, rss = _process_table()
    return _tree_kib([root], children, rss) / 1024


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def heap_mib(pid: int) -> tuple[float | None, float | None]:
    """The JVM's heap (committed, in use) from `jcmd GC.heap_info`; None when it does not answer."""
    try:
        said = subprocess.run(["jcmd", str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    for line in said.splitlines():  # " garbage-first heap   total 262144K, used 123456K [...]"
        if "total" in line and "used" in line:
            def kib(word: str) -> float:
                return round(int(line.split(word, 1)[1].split("K", 1)[0].strip()) / 1024, 1)
            return kib("total"), kib("used")
    return None, None


def native_memory_mib(pid: int) -> dict[str, float]:
    """Committed MiB per Native Memory Tracking category ("Java Heap", "Class", "Thread", "Code", "GC",
    "Internal", "Other", "Arena Chunk", ...) and "Total"; {} when the JVM does not answer."""
    try:
        said = subprocess.run(["jcmd", str(pid), "VM.native_memory", "summary", "scale=KB"], capture_output=True,
                              text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    found = {}
    for line in said.splitlines():  # "Total: reserved=...KB, committed=...KB" / "-  Class (reserved=...KB, committed=...KB)"
        line = line.strip()
        if not line.startswith(("-", "Total:")):  # a category's own lines ("(mmap: ...)") are its parts
            continue
        name, _, rest = line.lstrip("-").partition("(") if line.startswith("-") else line.partition(":")
        if "committed=" in rest and name.strip():
            found[name.strip().rstrip(":")] = round(int(rest.split("committed=", 1)[1].split("KB", 1)[0]) / 1024, 1)
    return found


def driver_jvms(root: int, children: dict[int, list[int]]) -> list[int]:
    """The JVMs among `root`'s children (pyspark's driver JVM)."""
    return [pid for pid in children.get(root, []) if "java" in _command(pid).split(" ", 1)[0]]


def breakdown(root: int) -> dict[str, float]:
    """Where the tree's resident set is: the Python driver, its JVM (and the JVM's heap committed and in use), the
    Python workers the JVM started (pyspark's daemon and its forks)."""
    children, rss = _process_table()
    jvms = driver_jvms(root, children)
    workers = [pid for jvm in jvms for pid in children.get(jvm, [])]
    return {"python_driver_mib": round(rss.get(root, 0) / 1024, 1),
            "jvm_mib": round(sum(rss.get(pid, 0) for pid in jvms) / 1024, 1),
            **dict(zip(("jvm_heap_committed_mib", "jvm_heap_used_mib"), heap_mib(jvms[0]) if jvms else (None, None))),
            "python_workers_mib": round(_tree_kib(workers, children, rss) / 1024, 1)}


def figures(port: int) -> dict[str, float]:
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {s.name.removeprefix("mirrorstack_continuous_"): s.value for f in text_string_to_metric_families(text)
            for s in f.samples if "le" not in s.labels}


def phase(proc: subprocess.Popen, seconds: float, intervals: int) -> dict:
    """CPU cores used in each of `intervals` equal parts of the phase's second half (the first half
    lets the rate settle), and the resident set at its end."""
    time.sleep(seconds / 2)
    part = seconds / 2 / intervals
    cores = []
    for _ in range(intervals):
        before, started = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(part)
        cores.append((cpu_seconds(proc.pid) - before) / (time.monotonic() - started))
    return {"cores_median": statistics.median(cores), "cores_min": min(cores), "cores_max": max(cores),
            "rss_mib": rss_mib(proc.pid)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", type=int, nargs="*", default=[200, 1000, 3000],
                        help="the rates whose CPU is measured (none: only the idle baseline and the long run)")
    parser.add_argument("--phase-seconds", type=float, default=180)
    parser.add_argument("--long-rate", type=int, default=1000)
    parser.add_argument("--long-minutes", type=float, default=30)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--native-memory", action="store_true",
                        help="the driver JVM's Native Memory Tracking, sampled every minute of the long run")
    parser.add_argument("--quick", action="store_true", help="tiny phases: a smoke run, figures meaningless")
    args = parser.parse_args()
    if args.quick:
        args.rates, args.phase_seconds, args.long_rate, args.long_minutes = [100], 20, 100, 0.5
    work = Path(tempfile.mkdtemp(prefix="bench-continuous-"))
    kafka = KafkaCluster("bcv", work / "kafka", brokers=1)
    kafka.start()
    proc = None
    writer = Writer(kafka.bootstrap_servers)
    try:
        for topic in ("orders", "edge.orders"):
            create_topic(kafka.bootstrap_servers, topic, PARTITIONS, 1)
        port = free_ports(1)[0]
        config = work / "flows.json"
        config.write_text(json.dumps({"flows": [{"name": "edge->central", "source_bootstrap": kafka.bootstrap_servers,
                                                 "target_bootstrap": kafka.bootstrap_servers, "source_alias": "edge",
                                                 "topics": ["orders"]}]}))
        argv = [sys.executable, "-m", "mirrorstack.spark.streaming", "--config", str(config),
                "--checkpoint-dir", str(work / "checkpoint"), "--metrics-port", str(port),
                "--window-seconds", str(WINDOW), "--trigger-seconds", str(TRIGGER),
                "--jars", ",".join(str(j) for j in toolchain.spark_kafka_jars())]
        log = open(work / "validator.log", "w")
        env = dict(os.environ)
        if args.native_memory:  # the driver JVM is pyspark's: JDK_JAVA_OPTIONS reaches it
            env["JDK_JAVA_OPTIONS"] = f"{env.get('JDK_JAVA_OPTIONS', '')} -XX:NativeMemoryTracking=summary".strip()
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=log, env=env)
        deadline = time.monotonic() + 180
        while _try(figures, port).get("last_batch_timestamp_seconds", 0) == 0:  # its first batch
            assert proc.poll() is None and time.monotonic() < deadline, (work / "validator.log").read_text()[-3000:]
            time.sleep(1)
        writer.start()
        report: dict = {"machine": {"cpus": os.cpu_count()}, "window_seconds": WINDOW, "trigger_seconds": TRIGGER,
                        "phase_seconds": args.phase_seconds, "rates": {}}
        print("idle (the baseline) ...", file=sys.stderr, flush=True)
        idle = phase(proc, args.phase_seconds, 4)
        report["idle"] = idle
        jvms = driver_jvms(proc.pid, _process_table()[0])  # the validator's default, or this run's environment's
        report["driver_malloc_arena_max"] = environment(jvms[0]).get("MALLOC_ARENA_MAX") if jvms else None
        for rate in args.rates:
            writer.rate = rate
            print(f"{rate} records/s ...", file=sys.stderr, flush=True)
            measured = phase(proc, args.phase_seconds, 4)
            measured["cores_per_1000_per_second"] = (measured["cores_median"] - idle["cores_median"]) / (rate / 1000)
            report["rates"][str(rate)] = measured
        writer.rate = args.long_rate
        print(f"{args.long_minutes:g} min at {args.long_rate} records/s ...", file=sys.stderr, flush=True)
        samples, native, started = [], [], time.monotonic()
        while time.monotonic() - started < args.long_minutes * 60:
            time.sleep(min(10.0, args.long_minutes * 6))
            samples.append([round(time.monotonic() - started), round(rss_mib(proc.pid), 1), breakdown(proc.pid)])
            if args.native_memory and (not native or samples[-1][0] - native[-1][0] >= 60):
                jvms = driver_jvms(proc.pid, _process_table()[0])
                native.append([samples[-1][0], native_memory_mib(jvms[0]) if jvms else {}])
        tenth = max(1, len(samples) // 10)
        first, last = statistics.median(s[1] for s in samples[:tenth]), statistics.median(s[1] for s in samples[-tenth:])
        parts = {key: [statistics.median(s[2][key] for s in part if s[2][key] is not None)
                       for part in (samples[:tenth], samples[-tenth:])] for key in samples[0][2]}
        report["long"] = {"rate": args.long_rate, "minutes": args.long_minutes, "rss_mib_samples": samples,
                          "rss_mib_first_tenth": first, "rss_mib_last_tenth": last, "growth": last / first,
                          "parts_first_and_last_tenth": parts, "native_memory_mib_samples": native}
        writer.rate = 0
        written = writer.written
        deadline = time.monotonic() + WINDOW + 120
        while True:  # every record the writer wrote since the validator started: confirmed, none missing
            seen = figures(port)
            if seen.get("confirmed_records_total", 0) >= written or time.monotonic() > deadline:
                break
            time.sleep(2)
        report["check"] = {"written": written, **{k: seen.get(f"{k}_records_total") for k in
                                                  ("confirmed", "missing", "duplicates", "extras")}}
        assert report["check"]["confirmed"] == written and report["check"]["missing"] == 0, report["check"]
        text = json.dumps(report, indent=2)
        if args.out:
            args.out.write_text(text + "\n")
        print(text)
    finally:
        writer.running = False
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        kafka.stop()


def _try(read, *args) -> dict:
    try:
        return read(*args)
    except requests.RequestException:
        return {}


if __name__ == "__main__":
    main()
