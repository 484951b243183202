"""What one Prometheus scrape costs a Kafka node, with and without the
exporter's `includeObjectNames` (components/monitoring/jmx.py).

Two KRaft nodes (broker and controller in one JVM, a 30-partition topic each)
run the pinned JMX exporter agent with the same rules: `all-mbeans` without the
include list (the exporter reads every attribute of every MBean, then keeps
what a rule matches), `included` with mirrorstack's list. Each round scrapes
each node `--scrapes` times in turn and reads the node's own CPU time
(/proc/<pid>/stat) before and after: CPU ms per scrape, per node and round; the
ratio is taken round by round (both measured under the same load), with the
spread. The series each exports must be the same.

  .venv/bin/python -m benchmarks.jmx_scrape [--rounds 5] [--scrapes 40] [--out report.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from benchmarks.replication import machine
from mirrorstack import toolchain
from mirrorstack.monitoring.jmx import jmx_exporter_config
from tests.support.kafka_clients import create_topic
from tests.support.ports import free_ports

CLK_TCK = os.sysconf("SC_CLK_TCK")


class Node:
    def __init__(self, folder: Path, exporter_config: dict):
        self.metrics_port, self.port, self.controller_port = free_ports(3)
        folder.mkdir(parents=True)
        (folder / "exporter.yaml").write_text(yaml.safe_dump(exporter_config, sort_keys=False))
        (folder / "server.properties").write_text("\n".join([
            "process.roles=broker,controller", "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "controller.listener.names=CONTROLLER", f"log.dirs={folder / 'data'}",
            "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1", ""]))
        java, classpath = toolchain.java_binary(), toolchain.kafka_classpath()
        subprocess.run([java, "-cp", classpath, "kafka.tools.StorageTool", "format", "-t", "mirrorstackbenchjmxAAA",
                        "-c", str(folder / "server.properties")], check=True, capture_output=True)
        agent = f"{toolchain.jmx_agent_jar()}=127.0.0.1:{self.metrics_port}:{folder / 'exporter.yaml'}"
        self.log = open(folder / "server.log", "w")
        self.proc = subprocess.Popen([java, "-Xmx512m", f"-javaagent:{agent}", "-cp", classpath, "kafka.Kafka",
                                      str(folder / "server.properties")], stdout=self.log, stderr=subprocess.STDOUT)

    def scrape(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=30) as reply:
            return reply.read().decode()

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.scrape()
                create_topic(f"127.0.0.1:{self.port}", "bench", partitions=30, replication_factor=1)
                return
            except Exception:  # noqa: BLE001 (not up yet)
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(1)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime

    def series(self) -> set[str]:
        return {line.split(" ")[0] for line in self.scrape().splitlines()
                if line and not line.startswith("#") and not line.startswith("jmx_scrape_")}

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def cpu_ms_per_scrape(node: Node, scrapes: int) -> float:
    before = node.cpu_seconds()
    for _ in range(scrapes):
        node.scrape()
    return (node.cpu_seconds() - before) * 1000 / scrapes


def run(rounds: int, scrapes: int) -> dict:
    included = yaml.safe_load(jmx_exporter_config())
    baseline = {k: v for k, v in included.items() if k != "includeObjectNames"}
    with tempfile.TemporaryDirectory(prefix="mirrorstack-bench-jmx-") as tmp:
        nodes = {"all-mbeans": Node(Path(tmp) / "all", baseline), "included": Node(Path(tmp) / "included", included)}
        try:
            for node in nodes.values():
                node.wait_ready()
            for node in nodes.values():  # warm: the JIT compiles the scrape path first
                cpu_ms_per_scrape(node, 10)
            per_round = []
            for i in range(rounds):
                measured = {name: cpu_ms_per_scrape(node, scrapes) for name, node in nodes.items()}
                per_round.append({**measured, "ratio": measured["all-mbeans"] / measured["included"]})
                print(f"round {i + 1}/{rounds}: " + ", ".join(f"{k} {v:.1f}" for k, v in per_round[-1].items()),
                      flush=True)
            series = {name: node.series() for name, node in nodes.items()}
        finally:
            for node in nodes.values():
                node.stop()
    ratios = [r["ratio"] for r in per_round]
    return {
        "machine": machine(), "scrapes_per_round": scrapes, "rounds": per_round,
        "cpu_ms_per_scrape_median": {name: statistics.median(r[name] for r in per_round) for name in nodes},
        "ratio_median": statistics.median(ratios), "ratio_spread": [min(ratios), max(ratios)],
        "series": {name: len(s) for name, s in series.items()},
        "same_series": series["all-mbeans"] == series["included"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scrapes", type=int, default=40)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report = run(args.rounds, args.scrapes)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    if not report["same_series"]:
        raise SystemExit("the include list changed what is exported")


if __name__ == "__main__":
    main()
