"""Duplicates after a Connect worker crash, per `offset.flush.interval.ms`.

An at-least-once flow resumes from the source offsets its worker last
committed; everything copied since is copied again. For each interval: a
producer writes at a steady rate, the flow replicates it, the worker is killed
(-9) `--kill-after` seconds after the first record arrived and started again;
once every record is on the target, duplicates = target records - source
records (each source record arrives at least once).

  .venv/bin/python -m benchmarks.crash_duplicates [--intervals 60000,10000] [--out report.json]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

from benchmarks.replication import (PARTITIONS, RECORD_SIZE, SCENARIOS, Configuration, Site, SiteView,
                                    connector_props, end_offsets, machine)
from mirrorstack import toolchain
from mirrorstack.mirror.provider import MirrorMaker2Provider
from mirrorstack.platforms.local import launcher
from tests.support.kafka_clients import create_topic


def crash_run(site: SiteView, config: Configuration, rate: int, seconds: int, kill_after: float) -> dict:
    topic, alias = f"crash-{uuid.uuid4().hex[:6]}", f"c{uuid.uuid4().hex[:6]}"
    worker = site.workers[config.name]
    create_topic(site.src.bootstrap_servers, topic, PARTITIONS, 1)
    provider = MirrorMaker2Provider()
    created = provider.create(connector_props(site, config, alias, topic))
    records = rate * seconds
    producer = subprocess.Popen([toolchain.java_binary(), "-Xmx256m", "-cp", toolchain.kafka_classpath(),
                                 "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                                 "--num-records", str(records), "--record-size", str(RECORD_SIZE),
                                 "--throughput", str(rate), "--producer-props",
                                 f"bootstrap.servers={site.src.bootstrap_servers}", "acks=all"],
                                stdout=subprocess.DEVNULL)
    remote = f"{alias}.{topic}"
    while end_offsets(site.dst.bootstrap_servers, remote) == 0:
        time.sleep(0.2)
    time.sleep(kill_after)
    before_kill = end_offsets(site.dst.bootstrap_servers, remote)
    os.killpg(worker.handles[0].pid, signal.SIGKILL)  # no graceful stop: no final offset commit
    while launcher.is_alive(worker.handles[0]):
        time.sleep(0.1)
    worker.handles.clear()
    worker.start()
    if producer.wait(seconds * 3) != 0:
        raise RuntimeError("ProducerPerformance failed")
    source = end_offsets(site.src.bootstrap_servers, topic)
    deadline = time.monotonic() + 300
    while (target := end_offsets(site.dst.bootstrap_servers, remote)) < source:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{remote}: {target} of {source} records after 300 s")
        time.sleep(1)
    time.sleep(5)  # nothing more in flight
    target = end_offsets(site.dst.bootstrap_servers, remote)
    provider.delete(created.id, created.outs)
    return {"rate": rate, "source_records": source, "target_records": target, "killed_after_seconds": kill_after,
            "replicated_before_kill": before_kill, "duplicates": target - source,
            "duplicates_in_seconds_of_traffic": (target - source) / rate}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--intervals", default="60000,10000", help="offset.flush.interval.ms values")
    parser.add_argument("--rate", type=int, default=20_000, help="records/s written to the source")
    parser.add_argument("--seconds", type=int, default=50, help="how long the producer writes")
    parser.add_argument("--kill-after", type=float, default=25, help="seconds after the first replicated record")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    intervals = [int(v) for v in args.intervals.split(",")]
    # mirrorstack's flow defaults, on workers that differ only in the interval
    configurations = [Configuration(f"flush-{ms}", {}, {"offset.flush.interval.ms": str(ms)}) for ms in intervals]
    report = {"machine": machine(), "runs": {}}
    with tempfile.TemporaryDirectory(prefix="mirrorstack-crash-") as tmp, ExitStack() as stack:
        lan = SCENARIOS["lan"]
        site = Site([lan], Path(tmp), configurations).start(stack).view(lan)
        for config in configurations:
            run = crash_run(site, config, args.rate, args.seconds, args.kill_after)
            report["runs"][config.name] = run
            print(f"{config.name}: killed after {args.kill_after:.0f} s, {run['duplicates']:,} duplicates "
                  f"({run['duplicates_in_seconds_of_traffic']:.1f} s of traffic)", flush=True)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
