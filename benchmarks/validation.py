"""Validation throughput and memory: the Spark job on `local[2]` (as the local
platform runs it) and on a standalone cluster (a master and two workers of one
core, started from PySpark's own jars), against a single-process Python
consumer doing the same reconciliation, on the same data, in one run.

For each size, N records go into a 4-partition source topic and, as a copy, into
its remote topic (same partitions, timestamps, keys and values: what MM2 writes;
written directly, since MM2's copy is not what is measured). Every validator
reconciles source and target record for record (2N rows read). Rounds alternate
the validators, each round starting with the next one, so drift on the machine and
the first run after writing the data hit all alike. Peak memory: the largest
sum of the resident sets of the validator's process tree (the job and its
driver JVM), plus, on the cluster, the executors under the workers; sampled
from /proc every 0.2 s.

  .venv/bin/python -m benchmarks.validation [--sizes 1000000 10000000] [--rounds 3] [--out report.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from mirrorstack import toolchain
from tests.support.kafka_clients import create_topic
from tests.support.services import KafkaCluster
from tests.support.spark_cluster import StandaloneCluster

PARTITIONS = 4
ROOT = Path(__file__).resolve().parents[1]

# The baseline: one Python process, confluent-kafka, a Counter of match keys.
BASELINE = r'''
import hashlib, json, sys, time
from collections import Counter
from confluent_kafka import Consumer, TopicPartition
def digest(b): return hashlib.sha256(b).digest() if b is not None else None
def read(bootstrap, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "baseline", "enable.auto.commit": False})
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    keys, left, last = Counter(), dict(ends), time.monotonic()
    while any(v > 0 for v in left.values()):
        if time.monotonic() - last > 60: sys.exit(f"{topic}: no record for 60 s, {left} left")
        for m in c.consume(10000, timeout=1.0):
            last = time.monotonic()
            if m.error(): continue
            h = tuple(sorted((k, digest(v)) for k, v in (m.headers() or [])))
            keys[(m.partition(), m.timestamp()[1], digest(m.key()), digest(m.value()), h)] += 1
            left[m.partition()] -= 1
    c.close()
    return keys
src_b, src_t, dst_b, dst_t, parts = sys.argv[1:6]
started = time.monotonic()
source, target = read(src_b, src_t, int(parts)), read(dst_b, dst_t, int(parts))
missing = sum((source - target).values()); extra = sum((target - source).values())
print(json.dumps({"seconds": time.monotonic() - started, "matched": sum((source & target).values()),
                  "missing": missing, "extra_or_duplicate": extra}))
'''

PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


def _process_table() -> tuple[dict[int, list[int]], dict[int, int]]:
    """({parent: children}, {pid: resident KiB}) from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            statm = Path(f"/proc/{entry}/statm").read_text().split()
        except OSError:
            continue  # exited meanwhile
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry))
        rss[int(entry)] = int(statm[1]) * PAGE_KIB
    return children, rss


def _tree_kib(roots: list[int], children: dict[int, list[int]], rss: dict[int, int], own: bool = True) -> int:
    """Resident KiB of the roots' descendants (and of the roots themselves with own=True)."""
    total, todo = 0, [pid for root in roots for pid in ([root] if own else children.get(root, []))]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def measured(argv: list[str], workers: list[int] = ()) -> dict:
    """Runs argv; its exit code, seconds, peak MiB of its process tree (and of the executors under
    `workers`, the cluster's worker daemons), stdout and the tail of stderr."""
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True, cwd=ROOT)
        peak = 0
        try:
            while proc.poll() is None:
                children, rss = _process_table()
                peak = max(peak, _tree_kib([proc.pid], children, rss)
                           + _tree_kib(list(workers), children, rss, own=False))
                time.sleep(0.2)
        finally:
            if proc.poll() is None:  # interrupted: the validator goes too
                proc.kill()
                proc.wait()
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        return {"exit": proc.returncode, "seconds": seconds, "peak_mib": peak / 1024, "stdout": out.read(),
                "stderr_tail": "".join(err.readlines()[-15:])}


def fill(bootstrap: str, topic: str, remote: str, records: int) -> None:
    """N records into `topic` and the same records (partition, timestamp, key, value) into `remote`."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000})
    first_ms = int(time.time() * 1000) - records  # one record per millisecond up to now (within retention)
    for i in range(records):
        key, value, partition, ts = str(i % 97).encode(), b"%d" % i * 10, i % PARTITIONS, first_ms + i
        for name in (topic, remote):
            while True:
                try:
                    producer.produce(name, key=key, value=value, partition=partition, timestamp=ts)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
    if producer.flush(300):
        raise SystemExit(f"{topic}: records left undelivered")


def spark_job(bootstrap: str, topic: str, size: int, work: Path, driver_memory: str,
              master: str | None = None, workers: list[int] = ()) -> dict:
    """The job as the local platform runs it (the driver's class-data archive when made)."""
    config = {"flows": [{"name": "src->dst", "source_bootstrap": bootstrap, "target_bootstrap": bootstrap,
                         "source_alias": "src", "policy": "default", "topics": [topic]}], "wait_seconds": 10}
    report_file = work / f"report-{size}.json"
    report_file.unlink(missing_ok=True)
    archive = toolchain.spark_archive_option()
    run = measured([sys.executable, "-m", "spark.validate_replication", "--quiet", "--out", str(report_file),
                    "--jars", ",".join(str(j) for j in toolchain.spark_kafka_jars()),
                    "--driver-memory", driver_memory, "--config-json", json.dumps(config),
                    *([f"--java-options={archive}"] if archive else []),
                    *(["--master", master, "--executor-memory", "1g"] if master else [])], workers)
    report = json.loads(report_file.read_text()) if report_file.is_file() else {}
    [group] = report.get("groups") or [{}]
    if run["exit"] != 0 or report.get("records_checked") != size:
        print(f"the Spark job ({master or 'local[2]'}) exited {run['exit']}, checked "
              f"{report.get('records_checked')} of {size}:\n{run['stderr_tail']}",
              file=sys.stderr, flush=True)
    return {"exit": run["exit"], "seconds": round(run["seconds"], 2), "peak_mib": round(run["peak_mib"]),
            "matched": group.get("matched"), "missing": group.get("missing"),
            "extra_or_duplicate": None if not group else group["extras"] + group["duplicates"]}


def baseline(bootstrap: str, topic: str) -> dict:
    run = measured([sys.executable, "-c", BASELINE, bootstrap, topic, bootstrap, f"src.{topic}", str(PARTITIONS)])
    if run["exit"] != 0:
        raise SystemExit(f"the baseline exited {run['exit']}:\n{run['stderr_tail']}")
    found = json.loads(run["stdout"].strip().splitlines()[-1])
    return {"exit": run["exit"], "seconds": round(run["seconds"], 2), "peak_mib": round(run["peak_mib"]),
            "matched": found["matched"], "missing": found["missing"],
            "extra_or_duplicate": found["extra_or_duplicate"]}


def summary(runs: list[dict], size: int) -> dict:
    seconds = [r["seconds"] for r in runs]
    return {"seconds_median": statistics.median(seconds), "seconds_spread": [min(seconds), max(seconds)],
            "rows_per_second": round(2 * size / statistics.median(seconds)),
            "peak_mib_max": max(r["peak_mib"] for r in runs), "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each validator (default 3: each one starts a round)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--driver-memory", default="1g", help="the Spark job's --driver-memory (its default)")
    args = parser.parse_args()
    report = {"partitions": PARTITIONS, "cores": os.cpu_count(), "rounds": args.rounds,
              "driver_memory": args.driver_memory, "class_archive": toolchain.spark_archive_option() is not None,
              "cluster": "standalone: a master and 2 workers of 1 core and 1g", "sizes": {}}
    with tempfile.TemporaryDirectory(prefix="mirrorstack-valbench-") as tmp:
        work = Path(tmp)
        kafka = KafkaCluster("valbench", work / "kafka", 1, heap="1g")
        cluster = StandaloneCluster(work / "spark", workers=2, cores=1, memory="1g")
        kafka.start()
        try:
            cluster.start()
            workers = [h.pid for h in cluster.handles[1:]]
            for size in args.sizes:
                topic = f"v{size}"
                for name in (topic, f"src.{topic}"):
                    create_topic(kafka.bootstrap_servers, name, PARTITIONS, 1)
                started = time.monotonic()
                fill(kafka.bootstrap_servers, topic, f"src.{topic}", size)
                print(f"{size:,} records written twice in {time.monotonic() - started:.0f} s", flush=True)
                validators = {
                    "local[2]": lambda: spark_job(kafka.bootstrap_servers, topic, size, work, args.driver_memory),
                    "standalone": lambda: spark_job(kafka.bootstrap_servers, topic, size, work, args.driver_memory,
                                                    cluster.master_url, workers),
                    "baseline": lambda: baseline(kafka.bootstrap_servers, topic)}
                runs: dict[str, list[dict]] = {name: [] for name in validators}
                names = list(validators)
                for round_ in range(args.rounds):
                    # Each round starts with the next validator: the first run after the fill is slower
                    # (run 7, 1M: the job 20.7 s first, 17.9 s second), and that must not fall on one alone.
                    for name in names[round_ % len(names):] + names[:round_ % len(names)]:
                        runs[name].append(validators[name]())
                        print(f"{size:,} records, round {round_ + 1}, {name}: {runs[name][-1]}", flush=True)
                results = {name: summary(r, size) for name, r in runs.items()}
                base = results["baseline"]["seconds_median"]
                for name in ("local[2]", "standalone"):
                    results[name]["ratio_to_baseline_throughput"] = round(base / results[name]["seconds_median"], 2)
                report["sizes"][str(size)] = results
        finally:
            cluster.stop()
            kafka.stop()
    sizes = list(report["sizes"])
    if len(sizes) > 1:
        first, last = report["sizes"][sizes[0]], report["sizes"][sizes[-1]]
        report["peak_memory_growth"] = {name: round(last[name]["peak_mib_max"] / first[name]["peak_mib_max"], 2)
                                        for name in first}
    for size, results in report["sizes"].items():
        for name, r in results.items():
            ratio = r.get("ratio_to_baseline_throughput")
            print(f"{int(size):>11,} records  {name:<11} {r['seconds_median']:7.1f} s "
                  f"(spread {r['seconds_spread'][0]:.1f}-{r['seconds_spread'][1]:.1f})  "
                  f"{r['rows_per_second']:>9,} rows/s  peak {r['peak_mib_max']:>6,} MiB"
                  + (f"  {ratio}x the baseline" if ratio else ""))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
