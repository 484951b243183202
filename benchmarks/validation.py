"""Validation throughput and memory: the Spark job against a single-process
Python consumer doing the same reconciliation, on the same data, in one run.

For each size, N records go into a source topic and a real MM2 flow copies them
to the target; then both validators reconcile source and target record for
record (match on partition, timestamp, key/value/header digests, multiplicity).
Each validator runs in its own process; peak memory is the largest sum of
the resident sets of its process tree (the job and its Spark JVM), sampled
from /proc every 0.2 s.

  .venv/bin/python -m benchmarks.validation [--sizes 1000000 10000000] [--out report.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.replication import end_offsets, fill, replication_pair
from mirrorstack import toolchain
from mirrorstack.mirror.connectors import mirror_connector_configs
from mirrorstack.mirror.resource import MirrorMaker2Provider
from mirrorstack.model.spec import load_topology
from tests.support.kafka_clients import create_topic

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
    keys, left = Counter(), dict(ends)
    while any(v > 0 for v in left.values()):
        for m in c.consume(10000, timeout=1.0):
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


def _tree_rss_kib(root: int) -> int:
    """Resident KiB of `root` and all its descendants, from /proc."""
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
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def measured(argv: list[str]) -> tuple[int, float, float, str, str]:
    """(exit code, seconds, peak MiB of the process tree, stdout, stderr tail)."""
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True, cwd=ROOT)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _tree_rss_kib(proc.pid))
            time.sleep(0.2)
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        return proc.returncode, seconds, peak / 1024, out.read(), "".join(err.readlines()[-15:])


def replicate(source, target, connect, topic: str, records: int) -> None:
    create_topic(source.bootstrap_servers, topic, PARTITIONS, 1)
    fill(source.bootstrap_servers, topic, records)
    flow = load_topology({"clusters": {"src": {}, "dst": {}},
                          "flows": [{"source": "src", "target": "dst", "topics": [topic], "tasks_max": 2,
                                     "checkpoints": False, "heartbeats": False}]}).flows[0].description()
    props = {"flow": flow.name, "connect_url": connect.rest_url, "timeout_seconds": "180", "restart_trigger": "",
             "connectors": mirror_connector_configs(flow, replication_factor=1,
                                                    source_bootstrap=source.bootstrap_servers,
                                                    target_bootstrap=target.bootstrap_servers)}
    provider = MirrorMaker2Provider()
    created = provider.create(props)
    deadline = time.monotonic() + 3600
    while end_offsets(target.bootstrap_servers, f"src.{topic}", PARTITIONS) < records:
        if time.monotonic() > deadline:
            raise RuntimeError("replication did not finish in an hour")
        time.sleep(2)
    provider.delete(created.id, created.outs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--driver-memory", default="1g", help="the Spark job's --driver-memory (its default)")
    args = parser.parse_args()
    results = []
    with replication_pair("mirrorstack-valbench-") as (source, target, connect):
        for size in args.sizes:
            topic = f"v{size}"
            replicate(source, target, connect, topic, size)
            config = {"flows": [{"name": "src->dst", "source_bootstrap": source.bootstrap_servers,
                                 "target_bootstrap": target.bootstrap_servers, "source_alias": "src",
                                 "policy": "default", "topics": [topic]}], "wait_seconds": 10}
            jars = ",".join(str(j) for j in toolchain.spark_kafka_jars())
            report_file = Path(tempfile.gettempdir()) / f"mirrorstack-validation-{size}.json"
            code, spark_s, spark_mb, _, spark_err = measured(
                [sys.executable, "-m", "spark.validate_replication", "--quiet", "--jars", jars, "--out",
                 str(report_file), "--driver-memory", args.driver_memory, "--config-json", json.dumps(config)])
            spark_report = json.loads(report_file.read_text()) if report_file.is_file() else {}
            if code != 0:
                print(f"the Spark job exited {code}:\n{spark_err}", file=sys.stderr, flush=True)
            _, base_s, base_mb, out, _ = measured([sys.executable, "-c", BASELINE, source.bootstrap_servers,
                                                   topic, target.bootstrap_servers, f"src.{topic}", str(PARTITIONS)])
            baseline = json.loads(out.strip().splitlines()[-1])
            results.append({"records": size, "spark_exit": code, "spark_failures": spark_report.get("failures"),
                            "spark_error": spark_report.get("error"), "driver_memory": args.driver_memory,
                            "spark_seconds": spark_s,
                            "spark_records_per_second": 2 * size / spark_s, "spark_peak_mib": spark_mb,
                            "baseline_seconds": base_s, "baseline_records_per_second": 2 * size / base_s,
                            "baseline_peak_mib": base_mb, "baseline_missing": baseline["missing"],
                            "baseline_extra_or_duplicate": baseline["extra_or_duplicate"],
                            "ratio_spark_to_baseline_throughput": base_s / spark_s})
            print(json.dumps(results[-1]), flush=True)
    report = {"partitions": PARTITIONS, "master": "local[2]", "cores": os.cpu_count(), "results": results}
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
