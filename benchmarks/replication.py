"""Replication throughput and latency of one MM2 flow on the local platform.

In one run, on the same machines and target cluster:
  baseline   Kafka's ProducerPerformance writing straight into the target
  mirrorstack  a flow with mirrorstack's generated connector configs
  seed       the same flow with the seed's configuration (tasks.max 2, MM2 defaults)
Throughput: a backlog of N records in the source, time until all are in the
target. Latency: after catch-up, records produced at a steady rate; target
arrival time minus the record's create timestamp (MM2 keeps timestamps).

  .venv/bin/python -m benchmarks.replication [--records 500000] [--out report.json]
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import threading
from contextlib import contextmanager
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from components import toolchain
from components.config.mirror import mirror_connector_configs
from components.mirror import MirrorMaker2Provider
from components.model import load_topology
from tests.support.kafka_clients import create_topic
from tests.support.services import ConnectGroup, KafkaCluster

PARTITIONS = 6
SEED_FLOW = {"tasks_max": 2}  # the seed's connector settings; everything else MM2's defaults
RECORD_SIZE = 512


@contextmanager
def replication_pair(prefix: str):
    """A source and a target cluster (1 broker each) and a Connect worker next
    to the target, on 127.0.0.1; all stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        base = Path(tmp)
        services = [KafkaCluster("src", base / "src", 1, heap="1g"), KafkaCluster("dst", base / "dst", 1, heap="1g")]
        try:
            for service in services:
                service.start()
            services.append(ConnectGroup("bench", base / "connect", services[1], heap="1g").start())
            yield services
        finally:
            for service in reversed(services):
                service.stop()


def producer_performance(bootstrap: str, topic: str, records: int) -> float:
    out = subprocess.run([toolchain.java_binary(), "-Xmx512m", "-cp", toolchain.kafka_classpath(),
                          "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                          "--num-records", str(records), "--record-size", str(RECORD_SIZE),
                          "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}", "acks=1"],
                         capture_output=True, text=True, check=True).stdout
    return float(re.findall(r"([\d.]+) records/sec", out)[-1])


def fill(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 262144})
    payload = b"x" * RECORD_SIZE
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=payload, key=str(i).encode())
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def end_offsets(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in range(partitions))
    except Exception:
        return 0  # remote topic not created yet
    finally:
        consumer.close()


def run_flow(source: KafkaCluster, target: KafkaCluster, connect: ConnectGroup, topic: str,
             records: int, flow_options: dict) -> dict:
    create_topic(source.bootstrap_servers, topic, PARTITIONS, 1)
    fill(source.bootstrap_servers, topic, records)
    topology = load_topology({"clusters": {"src": {"brokers": 1}, "dst": {"brokers": 1}},
                              "flows": [{"source": "src", "target": "dst", "topics": [topic], **flow_options}]})
    flow = topology.flows[0]
    props = {"flow": flow.name, "connect_url": connect.rest_url, "timeout_seconds": "180", "restart_trigger": "",
             "connectors": mirror_connector_configs(flow, replication_factor=1,
                                                    source_bootstrap=source.bootstrap_servers,
                                                    target_bootstrap=target.bootstrap_servers)}
    provider = MirrorMaker2Provider()
    remote = f"src.{topic}"
    started = time.monotonic()
    created = provider.create(props)
    # The clock starts at the first replicated record: connector start-up and
    # topic discovery are not throughput.
    first_at, first_count = None, 0
    while (count := end_offsets(target.bootstrap_servers, remote)) < records:
        if first_at is None and count > 0:
            first_at, first_count = time.monotonic(), count
        if time.monotonic() - started > 900:
            raise RuntimeError(f"{remote}: backlog not replicated in 900 s")
        time.sleep(0.2)
    if first_at is None:
        raise RuntimeError(f"{remote}: backlog arrived in one poll; use more --records")
    seconds = time.monotonic() - first_at
    records -= first_count
    latency = measure_latency(source.bootstrap_servers, target.bootstrap_servers, topic, remote)
    tasks = int(created.outs["states"][f"{flow.name}.MirrorSourceConnector"]["tasks"])
    provider.delete(created.id, created.outs)
    return {"records_per_second": records / seconds, "seconds": seconds, "source_tasks": tasks, **latency}


def measure_latency(source: str, target: str, topic: str, remote: str, count: int = 2000, rate: int = 500) -> dict:
    """Arrival time (taken by a consumer polling the target while the records
    are produced) minus each record's create timestamp."""
    consumer = Consumer({"bootstrap.servers": target, "group.id": f"bench-{uuid.uuid4().hex}",
                         "auto.offset.reset": "latest", "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    consumer.subscribe([remote])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    marker = uuid.uuid4().hex.encode()
    latencies: list[float] = []
    done = threading.Event()

    def collect():
        stop_at = None
        while len(latencies) < count:
            if done.is_set():
                stop_at = stop_at or time.monotonic() + 60
                if time.monotonic() > stop_at:
                    break
            for msg in consumer.consume(100, timeout=0.05):
                if not msg.error() and msg.value().startswith(marker):
                    latencies.append(time.time() * 1000 - msg.timestamp()[1])

    collector = threading.Thread(target=collect)
    collector.start()
    producer = Producer({"bootstrap.servers": source, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, value=marker + b"-" + str(i).encode())
        producer.poll(0)
        time.sleep(1 / rate)
    producer.flush(60)
    done.set()
    collector.join()
    consumer.close()
    latencies.sort()
    return {"latency_ms_p50": statistics.median(latencies), "latency_ms_p99": latencies[int(len(latencies) * 0.99) - 1],
            "latency_samples": len(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with replication_pair("mirrorstack-bench-") as services:
        create_topic(services[1].bootstrap_servers, "baseline", PARTITIONS, 1)
        baseline = producer_performance(services[1].bootstrap_servers, "baseline", args.records)
        run_flow(*services[:3], "warmup", args.records // 5, {})  # JIT, not measured
        # Alternate the two configurations and keep each one's best run, so
        # neither gains from running later on a warmer JVM and page cache.
        runs: dict[str, list[dict]] = {"mirrorstack": [], "seed": []}
        for round_ in range(args.rounds):
            runs["mirrorstack"].append(run_flow(*services[:3], f"bench-{round_}", args.records, {}))
            runs["seed"].append(run_flow(*services[:3], f"bench-seed-{round_}", args.records, SEED_FLOW))
        ours, seed = (max(runs[k], key=lambda r: r["records_per_second"]) for k in ("mirrorstack", "seed"))
    report = {
        "records": args.records, "record_size": RECORD_SIZE, "partitions": PARTITIONS,
        "baseline_producer_perf_records_per_second": baseline,
        "mirrorstack": ours, "seed_config": seed, "rounds": runs,
        "ratio_mirrorstack_to_producer_perf": ours["records_per_second"] / baseline,
        "ratio_mirrorstack_to_seed": ours["records_per_second"] / seed["records_per_second"],
        "ratio_latency_p50_seed_to_mirrorstack": seed["latency_ms_p50"] / ours["latency_ms_p50"],
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
