"""The local validation job's driver JVM options: Spark's defaults, its
class-data archive (`make class-archives`, tools/class_archives.py), C1 only
(`-XX:TieredStopAtLevel=1`), and both; CPU seconds (the whole machine's busy
time while the job runs: the job, its Spark launcher and driver JVMs) and wall
seconds, alternating rounds on one Kafka node, per size, with the spread.

  .venv/bin/python -m benchmarks.spark_archive [--rounds 3] [--sizes 1000 300000 2000000] [--out report.json]

Validations in stacks and tests are small (hundreds to thousands of records):
there most of the driver's CPU is start-up and compiling, which the archive
and C1 cut; on millions of records C2's code wins (the sizes show where).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.replication import CLOCK_TICKS, host_cpu
from mirrorstack import toolchain
from confluent_kafka import Producer

from tests.support.kafka_clients import create_topic
from tests.support.services import KafkaCluster

ROOT = Path(__file__).resolve().parents[1]


C1_ONLY, FULL_JIT = "-XX:TieredStopAtLevel=1", "-XX:TieredStopAtLevel=4"


def one_run(bootstrap: str, topic: str, options: str, work: Path) -> dict:
    flows = {"flows": [{"name": "bench", "source_bootstrap": bootstrap, "target_bootstrap": bootstrap,
                        "policy": "identity", "topics": [topic]}], "wait_seconds": 5}
    argv = [sys.executable, str(ROOT / "spark" / "validate_replication.py"), "--config-json", json.dumps(flows),
            "--jars", ",".join(str(j) for j in toolchain.spark_kafka_jars()), "--poll-seconds", "1", "--quiet",
            "--out", str(work / "report.json"),
            *([f"--java-options={options}"] if options else [])]
    busy_before, started = host_cpu(), time.monotonic()
    done = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=600)
    wall, busy_after = time.monotonic() - started, host_cpu()
    report = json.loads((work / "report.json").read_text())
    if done.returncode != 0 or not report.get("passed"):
        raise SystemExit(f"the validation failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return {"cpu_seconds": round((busy_after[0] - busy_before[0]) / CLOCK_TICKS, 2), "wall_seconds": round(wall, 2)}


def fill(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=str(i % 97).encode(), value=b"%d" % i * 10)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
    if producer.flush(120):
        raise SystemExit(f"{topic}: records left undelivered")


def summary(runs: list[dict]) -> dict:
    cpu, wall = [r["cpu_seconds"] for r in runs], [r["wall_seconds"] for r in runs]
    return {"cpu_seconds_median": statistics.median(cpu), "cpu_seconds_spread": [min(cpu), max(cpu)],
            "wall_seconds_median": statistics.median(wall), "wall_seconds_spread": [min(wall), max(wall)],
            "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 300_000, 2_000_000])
    parser.add_argument("--out")
    args = parser.parse_args()
    archive, mapped = toolchain.spark_class_archive(), toolchain.spark_archive_option()
    if archive is None:
        raise SystemExit("no Spark class-data archive: run `make class-archives`")
    # the job picks C1 by itself below spark_io.QUICK_JIT_BELOW records: the last option wins
    configurations = {"spark defaults": FULL_JIT, "archive": f"{mapped} {FULL_JIT}",
                      "C1 only": C1_ONLY, "archive and C1": f"{mapped} {C1_ONLY}"}
    report = {"rounds": args.rounds, "archive_mib": round(archive.stat().st_size / 2**20), "sizes": {}}
    with tempfile.TemporaryDirectory(prefix="mirrorstack-bench-cds-") as tmp:
        work = Path(tmp)
        kafka = KafkaCluster("bench", work / "kafka", 1)
        kafka.start()
        try:
            for size in args.sizes:
                topic = f"bench-{size}"
                create_topic(kafka.bootstrap_servers, topic, 2, 1)
                fill(kafka.bootstrap_servers, topic, size)
                runs: dict[str, list[dict]] = {name: [] for name in configurations}
                for round_ in range(args.rounds):  # alternating: drift on the machine hits all alike
                    for name, options in configurations.items():
                        runs[name].append(one_run(kafka.bootstrap_servers, topic, options, work))
                        print(f"{size} records, round {round_ + 1}, {name}: {runs[name][-1]}", flush=True)
                base = summary(runs["spark defaults"])
                report["sizes"][size] = {name: {**summary(r), "cpu_ratio": round(
                    summary(r)["cpu_seconds_median"] / base["cpu_seconds_median"], 2), "wall_ratio": round(
                    summary(r)["wall_seconds_median"] / base["wall_seconds_median"], 2)} for name, r in runs.items()}
        finally:
            kafka.stop()
    for size, results in report["sizes"].items():
        for name, result in results.items():
            print(f"{size:>9} records  {name:<15} CPU {result['cpu_seconds_median']:6.1f} s "
                  f"(x{result['cpu_ratio']})  wall {result['wall_seconds_median']:6.1f} s (x{result['wall_ratio']})")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
