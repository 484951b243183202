"""Replication throughput, CPU cost and latency of one MM2 flow, per scenario
and configuration, on the local platform (real brokers, real Connect workers).

Scenarios (a source and a target cluster of 1 broker each):
  lan       Connect next to the target, everything on loopback
  wan-pull  Connect next to the target, consuming across an emulated link (40 ms round trip)
  wan-push  Connect next to the source, producing across that link (producer overrides)
The link is Toxiproxy (benchmarks/link.py); brokers reached across it
advertise a listener through the proxy.

Configurations, each on its own Connect worker (so worker settings and CPU
are its own), all in the same run, rounds interleaved (the order rotates):
  mirrorstack  the product's defaults (mirrorstack.model.spec.Throughput, worker_defaults)
  seed         the seed's mm2.sh: tasks.max 2, everything else Kafka's defaults
  strimzi      Strimzi's documented high-volume MM2 example
  per-partition  mirrorstack's defaults with one task per partition (the old default)

Throughput: a backlog filled once per scenario by Kafka's ProducerPerformance
(its rate is the baseline); each run replicates it under a new source alias
for `--seconds` after the first record arrives. CPU: the Connect worker JVM's
utime+stime (/proc) over the same window, per million records. Latency:
afterwards, records produced at half the configuration's median throughput;
arrival at a consumer of the target minus the record's create timestamp.

  .venv/bin/python -m benchmarks.replication [--quick] [--out report.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform as host_platform
import re
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import requests
from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.link import Link, wan_listener
from mirrorstack import toolchain
from mirrorstack.connect.api import ConnectError
from mirrorstack.connect.worker import worker_defaults
from mirrorstack.mirror.connectors import mirror_connector_configs, throughput_settings
from mirrorstack.mirror.provider import MirrorMaker2Provider
from mirrorstack.model.spec import load_topology
from tests.support.kafka_clients import admin, create_topic
from tests.support.ports import free_ports
from tests.support.services import ConnectGroup, KafkaCluster

PARTITIONS = 6
RECORD_SIZE = 512
TOPIC = "bench"
RTT_MS = 40
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
LIGHT_SHARE = 0.1  # the light latency rate: this share of the slowest configuration's throughput


@dataclass(frozen=True)
class Configuration:
    name: str
    flow: dict = field(default_factory=dict)  # flow fields of the model (tasks_max, throughput, overrides)
    worker: dict = field(default_factory=dict)  # Connect worker settings
    kafka_defaults: bool = False  # drop mirrorstack's throughput settings: Kafka's own defaults


KAFKA_WORKER = {"offset.flush.interval.ms": "60000"}  # Kafka's default (the test harness sets 2 s)
CONFIGURATIONS = {
    "mirrorstack": Configuration("mirrorstack", worker=worker_defaults()),
    "seed": Configuration("seed", {"tasks_max": 2}, KAFKA_WORKER, kafka_defaults=True),
    # Streams for Apache Kafka (Strimzi) 2.5, "Configuring MirrorMaker 2 for high volume messages".
    "strimzi": Configuration("strimzi", {"tasks_max": 2, "overrides": {"source": {
        "producer.override.batch.size": "327680", "producer.override.linger.ms": "100",
        "consumer.fetch.max.bytes": "52428800", "consumer.max.partition.fetch.bytes": "1048576",
        "consumer.max.poll.records": "500"}}}, {**KAFKA_WORKER, "offset.flush.timeout.ms": "10000"},
        kafka_defaults=True),
    "per-partition": Configuration("per-partition", {"tasks_max": PARTITIONS}, worker_defaults()),
}


@dataclass(frozen=True)
class Scenario:
    name: str
    link: bool  # an emulated WAN link between the data centres
    connect_near: str  # "target" (pull) or "source" (push)


SCENARIOS = {
    "lan": Scenario("lan", False, "target"),
    "wan-pull": Scenario("wan-pull", True, "target"),
    "wan-push": Scenario("wan-push", True, "source"),
}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def host_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, sum(values)


def host_busy_fraction(before: tuple[int, int], after: tuple[int, int]) -> float:
    return (after[0] - before[0]) / max(1, after[1] - before[1])


def peak_rss_mib(pid: int) -> float:
    match = re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(match.group(1)) / 1024 if match else 0.0


class Site:
    """Two clusters, the link between them, one Connect worker per configuration
    next to each cluster some scenario runs Connect beside. A full run builds a
    site per scenario; `--quick` shares one among all scenarios (see `view`)."""

    def __init__(self, scenarios: list[Scenario], base: Path, configurations: list[Configuration]):
        self.src = KafkaCluster("src", base / "src", 1, heap="1g")
        self.dst = KafkaCluster("dst", base / "dst", 1, heap="1g")
        self.link = Link(base / "link", RTT_MS) if any(s.link for s in scenarios) else None
        self._proxies: list[tuple[str, int, int]] = []
        self.remote_bootstrap: dict[str, str] = {}  # cluster name: its bootstrap across the link
        for remote in dict.fromkeys(self._remote(s) for s in scenarios if s.link):
            wan_port, proxy_port = free_ports(2)
            remote.broker_overrides.update(wan_listener(remote.broker_ports[0], wan_port, proxy_port))
            self.remote_bootstrap[remote.name] = f"127.0.0.1:{proxy_port}"
            self._proxies.append(("wan" if len(scenarios) == 1 else f"wan-{remote.name}", wan_port, proxy_port))
        nears = list(dict.fromkeys(s.connect_near for s in scenarios))
        self.workers: dict[tuple[str, str], ConnectGroup] = {}  # (connect_near, configuration): its worker
        for near in nears:
            suffix = "" if len(nears) == 1 else f"-{near}"
            for c in configurations:
                self.workers[(near, c.name)] = ConnectGroup(
                    f"bench-{c.name}{suffix}", base / f"connect-{c.name}{suffix}", self._near(near), heap="1g",
                    overrides={**KAFKA_WORKER, **c.worker})

    def _near(self, connect_near: str) -> KafkaCluster:
        return self.src if connect_near == "source" else self.dst

    def _remote(self, scenario: Scenario) -> KafkaCluster:
        """The cluster across the link from Connect."""
        return self.dst if scenario.connect_near == "source" else self.src

    def start(self, stack: ExitStack) -> Site:
        """Each cluster and then the workers beside it, the two (and the link) at once."""
        stack.callback(self.stop)  # first: whatever did start is stopped, also when a start fails

        def cluster_then_workers(cluster: KafkaCluster) -> None:
            cluster.start()
            near = [w for (where, _), w in self.workers.items() if self._near(where) is cluster]
            _parallel([w.start for w in near])

        def link() -> None:
            self.link.start()
            for name, wan_port, proxy_port in self._proxies:
                self.link.proxy(name, wan_port, proxy_port)

        _parallel([lambda: cluster_then_workers(self.src), lambda: cluster_then_workers(self.dst),
                   *([link] if self.link else [])])
        return self

    def stop(self) -> None:
        try:
            _parallel([w.stop for w in self.workers.values()])  # before the clusters their topics live on
        finally:
            _parallel([self.src.stop, self.dst.stop, *([self.link.stop] if self.link else [])])

    def view(self, scenario: Scenario) -> SiteView:
        return SiteView(scenario, self)


@dataclass
class SiteView:
    """One scenario's part of a site: its workers (by configuration) and bootstraps."""
    scenario: Scenario
    site: Site

    @property
    def src(self) -> KafkaCluster:
        return self.site.src

    @property
    def dst(self) -> KafkaCluster:
        return self.site.dst

    @property
    def workers(self) -> dict[str, ConnectGroup]:
        return {name: w for (near, name), w in self.site.workers.items() if near == self.scenario.connect_near}

    def bootstraps(self) -> tuple[str, str]:
        """(source, target) bootstrap servers as the Connect workers reach them."""
        site, remote = self.site, self.site._remote(self.scenario)
        across = site.remote_bootstrap[remote.name] if self.scenario.link else remote.bootstrap_servers
        if self.scenario.connect_near == "source":
            return site.src.bootstrap_servers, across
        return across, site.dst.bootstrap_servers


def _parallel(calls) -> None:
    """Run `calls` at once; raise the first failure once all have ended."""
    with ThreadPoolExecutor(max(1, len(calls))) as pool:
        futures = [pool.submit(call) for call in calls]
    for future in futures:
        future.result()


def producer_performance(bootstrap: str, topic: str, records: int) -> float:
    """Kafka's own producer at full speed (acks=all, as Connect's): the baseline."""
    out = subprocess.run([toolchain.java_binary(), "-Xmx512m", "-cp", toolchain.kafka_classpath(),
                          "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                          "--num-records", str(records), "--record-size", str(RECORD_SIZE),
                          "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all"],
                         capture_output=True, text=True, check=True).stdout
    return float(re.findall(r"([\d.]+) records/sec", out)[-1])


def end_offsets(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in range(PARTITIONS))
    except Exception:
        return 0  # remote topic not created yet
    finally:
        consumer.close()


def connector_props(site: SiteView, config: Configuration, alias: str, topic: str) -> dict:
    """The flow's connectors as mirrorstack generates them, under source alias `alias`."""
    topology = load_topology({"clusters": {alias: {"brokers": 1}, "dst": {"brokers": 1}},
                              "flows": [{"source": alias, "target": "dst", "topics": [topic], **config.flow}]})
    flow = topology.flows[0].description()
    source, target = site.bootstraps()
    connectors = mirror_connector_configs(flow, replication_factor=1, source_bootstrap=source,
                                          target_bootstrap=target, push=site.scenario.connect_near == "source")
    if config.kafka_defaults:
        tuned = throughput_settings(flow)
        source_config = connectors[flow.connector_name("source")]
        for key in tuned:
            if key not in config.flow.get("overrides", {}).get("source", {}):
                source_config.pop(key)
    return {"flow": flow.name, "connect_url": site.workers[config.name].rest_url, "timeout_seconds": "180",
            "restart_trigger": "", "connectors": connectors}


def drop(site: SiteView, provider: MirrorMaker2Provider, created, alias: str, topic: str) -> None:
    for attempt in range(3):  # a worker still draining a saturated run may take minutes to stop its tasks
        try:
            provider.delete(created.id, created.outs)
            break
        except ConnectError:
            if attempt == 2:
                raise
    futures = admin(site.dst.bootstrap_servers).delete_topics([f"{alias}.{topic}", f"{alias}.checkpoints.internal"])
    for future in futures.values():
        try:
            future.result(30)
        except Exception:
            pass  # a topic this configuration never created


def settle() -> float:
    """Write dirty pages back before a measured run: the last run's (or the
    fill's) gigabytes of writeback would otherwise slow the next run, and the
    figures would drift with the order of the runs."""
    started = time.monotonic()
    os.sync()
    return time.monotonic() - started


def throughput_run(site: SiteView, config: Configuration, alias: str, records: int, seconds: float,
                   topic: str = TOPIC) -> dict:
    """Replicates the backlog `topic` under source alias `alias`."""
    settle()
    provider = MirrorMaker2Provider()
    remote = f"{alias}.{topic}"
    pid = site.workers[config.name].handles[0].pid
    started, created_cpu = time.monotonic(), cpu_seconds(pid)
    created = provider.create(connector_props(site, config, alias, topic))  # returns once running
    first = None
    while True:  # the clock starts at the first replicated record: start-up is not throughput
        count = end_offsets(site.dst.bootstrap_servers, remote)
        now = time.monotonic()
        if first is None and count >= records:
            # the whole backlog arrived while `create` waited for the tasks (a --quick
            # run on an idle machine): only the creation can start the clock
            first = (started, 0, created_cpu)
            break
        if first is None and count > 0:
            first = (now, count, cpu_seconds(pid))
        # the window ends past `seconds`, but only once more records came: a loaded machine may
        # deliver nothing more within a short (--quick) window, and a rate needs two counts
        elif first is not None and (count >= records or (now - first[0] >= seconds and count > first[1])):
            break
        if now - started > seconds + 300:
            raise RuntimeError(f"{config.name}: {remote} got {count} records in {now - started:.0f} s")
        time.sleep(0.25)
    replicated, elapsed, cpu = count - first[1], now - first[0], cpu_seconds(pid) - first[2]
    status = requests.get(f"{site.workers[config.name].rest_url}/connectors/{alias}->dst.MirrorSourceConnector/status",
                          timeout=10).json()
    tasks = sum(task["state"] == "RUNNING" for task in status["tasks"])
    drop(site, provider, created, alias, topic)
    if replicated >= records - first[1] and elapsed < seconds * 0.5:
        print(f"    warning: the backlog ran out after {elapsed:.1f} s; use more --records", flush=True)
    return {"records_per_second": replicated / elapsed, "seconds": elapsed, "records": replicated,
            "cpu_seconds_per_million": cpu / replicated * 1e6, "source_tasks": tasks,
            "worker_peak_rss_mib": peak_rss_mib(pid)}


WARMUP = b"warmup"  # the value of the records that start the flow (ProducerPerformance's are 512 random letters)
SAMPLE_EVERY_RECORD_BELOW = 20_000  # records sent: below this every partition is sampled (see latency_run)
DRAIN_QUIET_SECONDS = 60  # after the producer: how long the samples may stop arriving before the run fails


def latency_run(site: SiteView, config: Configuration, alias: str, rate: float, seconds: float) -> dict:
    """Kafka's ProducerPerformance writes at `rate` for `seconds` into a fresh
    topic the flow mirrors; a consumer of the target's partition 0 (a sixth of
    the records: a Python consumer of every record would take the CPU the flow
    needs) takes arrival time minus each record's create timestamp.

    A short run samples every partition instead: the producer's sticky
    partitioner keeps a partition for a batch (16 KB, 32 records) at a time, so
    partition 0 alone may get none of a few hundred records; and a consumer of
    fewer than SAMPLE_EVERY_RECORD_BELOW records costs the flow nothing. The
    run ends when every record produced to the sampled partitions has arrived
    (or fails when none arrived for DRAIN_QUIET_SECONDS)."""
    topic = f"lat-{alias}"
    settle()
    create_topic(site.src.bootstrap_servers, topic, PARTITIONS, 1)
    provider = MirrorMaker2Provider()
    created = provider.create(connector_props(site, config, alias, topic))
    remote = f"{alias}.{topic}"
    producer = Producer({"bootstrap.servers": site.src.bootstrap_servers})
    deadline = time.monotonic() + 120
    while end_offsets(site.dst.bootstrap_servers, remote) == 0:  # the flow runs end to end
        producer.produce(topic, value=WARMUP)
        producer.flush(10)
        if time.monotonic() > deadline:
            raise RuntimeError(f"{config.name}: nothing reached {remote} in 120 s")
        time.sleep(0.25)
    del producer
    sent = max(1, int(rate * seconds))
    partitions = range(PARTITIONS) if sent < SAMPLE_EVERY_RECORD_BELOW else [0]
    consumer = Consumer({"bootstrap.servers": site.dst.bootstrap_servers, "group.id": f"bench-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 5})
    source_watch = Consumer({"bootstrap.servers": site.src.bootstrap_servers, "group.id": "bench-watermarks"})
    source_start = [source_watch.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions]
    # (warmup records may still arrive after these offsets: they are told apart by their value)
    consumer.assign([TopicPartition(remote, p, consumer.get_watermark_offsets(TopicPartition(remote, p), timeout=10)[1])
                     for p in partitions])
    latencies: list[float] = []
    expected: list[int] = []  # known once the producer is done
    done = threading.Event()
    stalled = threading.Event()

    def collect():
        quiet_until = None
        while not expected or len(latencies) < expected[0]:
            arrived = False
            for msg in consumer.consume(1000, timeout=0.05):
                if not msg.error() and msg.value() != WARMUP:
                    latencies.append(time.time() * 1000 - msg.timestamp()[1])
                    arrived = True
            if done.is_set():
                now = time.monotonic()
                if arrived or quiet_until is None:
                    quiet_until = now + DRAIN_QUIET_SECONDS
                elif now > quiet_until:
                    stalled.set()
                    return

    collector = threading.Thread(target=collect)
    collector.start()
    busy_before = host_cpu()
    try:
        subprocess.run([toolchain.java_binary(), "-Xmx256m", "-cp", toolchain.kafka_classpath(),
                        "org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", str(sent),
                        "--record-size", str(RECORD_SIZE), "--throughput", str(max(1, int(rate))),
                        "--producer-props",
                        # 16 KB batches: the sticky partitioner moves on after a batch's worth of records
                        f"bootstrap.servers={site.src.bootstrap_servers}", "acks=1", "linger.ms=5",
                        "batch.size=16384"],
                       capture_output=True, check=True)
        busy = host_busy_fraction(busy_before, host_cpu())
        expected.append(sum(source_watch.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] - start
                            for p, start in zip(partitions, source_start)))
    finally:
        if not expected:  # the producer failed: the collector stops now, its error goes on
            expected.append(0)
        source_watch.close()
        done.set()
        collector.join()
        consumer.close()
    drop(site, provider, created, alias, topic)
    if stalled.is_set():
        raise RuntimeError(f"{config.name}: {len(latencies)} of {expected[0]} latency samples arrived at {remote} "
                           f"(partitions {list(partitions)}), then none for {DRAIN_QUIET_SECONDS} s")
    if not latencies:
        raise RuntimeError(f"{config.name}: no latency sample: none of {sent} records went to partitions "
                           f"{list(partitions)} of {topic}")
    latencies.sort()
    return {"rate": rate, "latency_ms_p50": statistics.median(latencies),
            "latency_ms_p99": latencies[max(0, int(len(latencies) * 0.99) - 1)],
            "samples": len(latencies), "sent": sent, "host_cpu_busy": busy}


def summary(runs: list[dict]) -> dict:
    rates = [r["records_per_second"] for r in runs]
    median = statistics.median(rates)
    return {"records_per_second_median": median, "records_per_second_min": min(rates),
            "records_per_second_max": max(rates),
            # the measure: how far the extremes lie from the median
            "spread_pct": 100 * max(max(rates) - median, median - min(rates)) / median,
            "cpu_seconds_per_million_median": statistics.median(r["cpu_seconds_per_million"] for r in runs),
            "source_tasks": runs[0]["source_tasks"],
            "worker_peak_rss_mib": max(r["worker_peak_rss_mib"] for r in runs)}


def run_scenarios(scenarios: list[Scenario], configurations: list[Configuration], args) -> dict:
    """{scenario name: its results}. A full run gives each scenario fresh clusters
    and workers (the backlog, the page cache and the JIT of one scenario never
    meet the next); `--quick` runs them all on one site, each scenario on its
    own backlog topic through its own workers and bootstraps."""
    if not args.quick:
        return {s.name: _own_site(s, configurations, args) for s in scenarios}
    with tempfile.TemporaryDirectory(prefix="mirrorstack-bench-quick-") as tmp, ExitStack() as stack:
        site = Site(scenarios, Path(tmp), configurations).start(stack)
        return {s.name: run_scenario(site.view(s), configurations, args, f"{TOPIC}-{s.name}") for s in scenarios}


def _own_site(scenario: Scenario, configurations: list[Configuration], args) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"mirrorstack-bench-{scenario.name}-") as tmp, ExitStack() as stack:
        site = Site([scenario], Path(tmp), configurations).start(stack)
        return run_scenario(site.view(scenario), configurations, args, TOPIC)


def run_scenario(site: SiteView, configurations: list[Configuration], args, topic: str) -> dict:
    print(f"== {site.scenario.name}", flush=True)
    create_topic(site.src.bootstrap_servers, topic, PARTITIONS, 1)
    baseline = producer_performance(site.src.bootstrap_servers, topic, args.records)
    print(f"  ProducerPerformance (fills the backlog): {baseline:,.0f} rec/s; "
          f"its writeback took {settle():.0f} s more", flush=True)
    if not args.quick:  # the brokers' JIT and heap, then each worker's: not measured
        throughput_run(site, configurations[0], f"w{uuid.uuid4().hex[:6]}", args.records, args.seconds, topic)
        for config in configurations:
            throughput_run(site, config, f"w{uuid.uuid4().hex[:6]}", args.records, min(args.seconds, 10), topic)
    runs: dict[str, list[dict]] = {c.name: [] for c in configurations}
    for round_ in range(args.rounds):
        order = configurations[round_ % len(configurations):] + configurations[:round_ % len(configurations)]
        for config in order:
            run = throughput_run(site, config, f"r{round_}{uuid.uuid4().hex[:6]}", args.records, args.seconds,
                                 topic)
            runs[config.name].append(run)
            print(f"  round {round_ + 1} {config.name:>13}: {run['records_per_second']:>9,.0f} rec/s "
                  f"over {run['seconds']:.0f} s, {run['cpu_seconds_per_million']:.1f} CPU s/M records", flush=True)
    result = {"baseline_producer_perf_records_per_second": baseline, "configurations": {}}
    # A light rate every configuration carries: latency without the CPU limit of this host.
    summaries = {c.name: summary(runs[c.name]) for c in configurations}
    light = LIGHT_SHARE * min(f["records_per_second_median"] for f in summaries.values())
    for config in configurations:
        figures = summaries[config.name]
        half = figures["records_per_second_median"] / 2
        half_run = latency_run(site, config, f"l{uuid.uuid4().hex[:6]}", half, args.latency_seconds)
        figures.update(half_run)
        # --quick: the light rate would run the same code again (a new flow, a JVM): its figures are the half
        # rate's (quick figures mean nothing anyway)
        figures["light"] = ({**half_run, "rate": light} if args.quick else
                            latency_run(site, config, f"m{uuid.uuid4().hex[:6]}", light, args.latency_seconds))
        print(f"  latency {config.name:>13} at {half:,.0f} rec/s: p50 {figures['latency_ms_p50']:.0f} ms, "
              f"p99 {figures['latency_ms_p99']:.0f} ms (host CPU {figures['host_cpu_busy']:.0%} busy); "
              f"at {light:,.0f} rec/s: p50 {figures['light']['latency_ms_p50']:.0f} ms, "
              f"p99 {figures['light']['latency_ms_p99']:.0f} ms", flush=True)
        result["configurations"][config.name] = {**figures, "rounds": runs[config.name]}
    ours = result["configurations"].get("mirrorstack")
    if ours:
        for other in result["configurations"]:
            if other != "mirrorstack":
                theirs = result["configurations"][other]
                result[f"ratio_mirrorstack_to_{other}"] = (ours["records_per_second_median"]
                                                           / theirs["records_per_second_median"])
        result["ratio_mirrorstack_to_producer_perf"] = ours["records_per_second_median"] / baseline
    return result


def machine() -> dict:
    cpu = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
    mem = re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text())
    return {"cpus": os.cpu_count(), "cpu_model": cpu.group(1) if cpu else "?",
            "memory_gib": round(int(mem.group(1)) / 2**20, 1) if mem else None,
            "kernel": host_platform.release(), "python": host_platform.python_version()}


def markdown(report: dict) -> str:
    lines = ["| scenario | configuration | tasks | rec/s median | spread | CPU s / M records | "
             "latency p50 / p99 ms at half rate (host CPU busy) | at the light rate |", "|---|---|---|---|---|---|---|---|"]
    for name, scenario in report["scenarios"].items():
        lines.append(f"| {name} | ProducerPerformance | | {scenario['baseline_producer_perf_records_per_second']:,.0f} "
                     "| | | | |")
        for config, f in scenario["configurations"].items():
            lines.append(f"| {name} | {config} | {f['source_tasks']} | {f['records_per_second_median']:,.0f} | "
                         f"±{f['spread_pct']:.0f}% | {f['cpu_seconds_per_million_median']:.1f} | "
                         f"{f['latency_ms_p50']:.0f} / {f['latency_ms_p99']:.0f} ({f['host_cpu_busy']:.0%}) | "
                         f"{f['light']['latency_ms_p50']:.0f} / {f['light']['latency_ms_p99']:.0f} "
                         f"at {f['light']['rate']:,.0f}/s |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=12_000_000, help="backlog per scenario (outlasts 30 s)")
    parser.add_argument("--seconds", type=float, default=30, help="measured window of each run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-seconds", type=float, default=20)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--configurations", default=",".join(CONFIGURATIONS))
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=JSON", help=(
        "also run mirrorstack's defaults with these flow fields, e.g. "
        "'lz4={\"throughput\": {\"compression\": \"lz4\"}}' (repeatable)"))
    parser.add_argument("--quick", action="store_true", help="a smoke run of the code: tiny, figures meaningless")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.quick:  # the least that yields every figure: one round, 1 s windows
        args.records, args.seconds, args.rounds, args.latency_seconds = 40_000, 1, 1, 1
    configurations = [CONFIGURATIONS[name] for name in args.configurations.split(",") if name]
    for variant in args.variant:
        name, _, fields = variant.partition("=")
        configurations.append(Configuration(name, json.loads(fields), worker_defaults()))
    report = {"machine": machine(), "quick": args.quick, "records": args.records, "window_seconds": args.seconds,
              "rounds": args.rounds, "record_size": RECORD_SIZE, "partitions": PARTITIONS, "rtt_ms": RTT_MS,
              "scenarios": {}}
    scenarios = [SCENARIOS[name] for name in args.scenarios.split(",")]
    report["scenarios"] = run_scenarios(scenarios, configurations, args)
    report["table"] = markdown(report)
    print(report["table"])
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
