"""Real Kafka clusters, Connect worker groups and Prometheus on 127.0.0.1."""
from __future__ import annotations

import base64
import uuid
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import requests

from mirrorstack import toolchain
from mirrorstack.kafka import broker
from mirrorstack.connect import worker as connect
from mirrorstack.platforms import jvm
from mirrorstack.monitoring.jmx import jmx_exporter_config
from mirrorstack.platforms.log4j2 import log4j2_properties
from mirrorstack.monitoring.prometheus import prometheus_config
from mirrorstack.platforms.descriptions import ScrapeTarget
from mirrorstack.properties import render_properties
from mirrorstack.connect import readiness
from mirrorstack.platforms.local import health, launcher
from tests.support.ports import free_ports

HOST = "127.0.0.1"
MIRROR_CONNECTORS = readiness.MIRROR_CONNECTOR_CLASSES


def _parallel(calls) -> list:
    calls = list(calls)
    with ThreadPoolExecutor(max_workers=max(1, len(calls))) as pool:
        return [f.result() for f in [pool.submit(call) for call in calls]]


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, url-safe base64 (never starting
    with '-', which the storage tool would read as a flag)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


class _JavaService:
    """Shared pieces for services that are Kafka JVMs."""

    def __init__(self, base_dir: Path, jmx: bool, heap: str):
        self.base_dir = Path(base_dir)
        self.jmx = jmx
        self.heap = heap
        self.java = toolchain.java_binary()
        self.classpath = toolchain.kafka_classpath()
        self.jmx_jar = str(toolchain.jmx_agent_jar()) if jmx else None
        self.log4j = _write(self.base_dir / "log4j2.properties", log4j2_properties())
        self.jmx_config = _write(self.base_dir / "jmx-exporter.yaml", jmx_exporter_config()) if jmx else None
        self.handles: list[launcher.ProcessHandle] = []
        self.jmx_ports: list[int] = []
        self.system_properties: list[str] = []

    def command(self, main: str, args: list[str], jmx_port: int | None = None) -> list[str]:
        agent = (self.jmx_jar, HOST, jmx_port, self.jmx_config) if jmx_port else None
        return jvm.java_command(self.java, main, args, classpath=self.classpath, heap=self.heap,
                                log4j_file=self.log4j, jmx_agent=agent, system_properties=self.system_properties)

    @property
    def jmx_targets(self) -> list[str]:
        return [f"{HOST}:{port}" for port in self.jmx_ports]

    def stop(self) -> None:
        _parallel(partial(launcher.stop, h) for h in self.handles)


class KafkaCluster(_JavaService):
    """One KRaft controller plus `brokers` brokers."""

    CONTROLLER_ID = 1

    def __init__(self, name: str, base_dir: Path, brokers: int = 1, *, jmx: bool = False,
                 heap: str = "512m", broker_overrides: dict[str, str] | None = None):
        super().__init__(base_dir, jmx, heap)
        self.name = name
        self.broker_count = brokers
        self.broker_overrides = {"group.initial.rebalance.delay.ms": "0", **(broker_overrides or {})}
        ports = free_ports(1 + brokers + (brokers if jmx else 0))
        self.controller_port, self.broker_ports = ports[0], ports[1:1 + brokers]
        self.jmx_ports = ports[1 + brokers:]

    @property
    def controller_handle(self) -> launcher.ProcessHandle | None:
        return self.handles[0] if self.handles else None

    @property
    def broker_handles(self) -> list[launcher.ProcessHandle]:
        return self.handles[1:]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{HOST}:{port}" for port in self.broker_ports)

    def broker_settings(self, index: int) -> dict[str, str]:
        """Broker `index`'s settings beyond the generated ones (a subclass may add its own)."""
        return self.broker_overrides

    def _node_files(self) -> list[tuple[str, str, int | None]]:
        """(node name, properties file, jmx port) for the controller and each broker."""
        voters = broker.quorum_voters({self.CONTROLLER_ID: f"{HOST}:{self.controller_port}"})
        nodes = []
        ctrl_dir = self.base_dir / "controller"
        props = broker.controller_properties(self.CONTROLLER_ID, host=HOST, port=self.controller_port,
                                             voters=voters, log_dir=str(ctrl_dir / "data"),
                                             broker_count=self.broker_count)
        nodes.append(("controller", _write(ctrl_dir / "server.properties", render_properties(props)), None))
        for i, port in enumerate(self.broker_ports):
            node_dir = self.base_dir / f"broker-{i}"
            props = broker.broker_properties(
                self.CONTROLLER_ID + 1 + i, host=HOST, port=port, voters=voters,
                log_dir=str(node_dir / "data"), broker_count=self.broker_count,
                overrides=self.broker_settings(i))
            jmx_port = self.jmx_ports[i] if self.jmx else None
            nodes.append((f"broker-{i}", _write(node_dir / "server.properties", render_properties(props)), jmx_port))
        return nodes

    def start(self, timeout: float = 120.0) -> KafkaCluster:
        nodes = self._node_files()
        cluster_id = new_cluster_id()
        _parallel(
            partial(launcher.run, f"{self.name} {node} storage format",
                    jvm.java_command(self.java, jvm.STORAGE_TOOL_MAIN,
                                     ["format", "-t", cluster_id, "-c", props],
                                     classpath=self.classpath, heap="256m",
                                     log4j_file=self.log4j, short_lived=True),
                    log_file=self.base_dir / f"{node}-format.log")
            for node, props, _ in nodes)
        return self._launch(nodes, timeout)

    def start_again(self, timeout: float = 120.0) -> KafkaCluster:
        """The stopped cluster started from its files, its records and group offsets kept (a data
        centre that comes back)."""
        self.handles = []
        return self._launch(self._node_files(), timeout)

    def _launch(self, nodes, timeout: float) -> KafkaCluster:
        for node, props, jmx_port in nodes:
            handle = launcher.start(f"{self.name}/{node}", self.command(jvm.BROKER_MAIN, [props], jmx_port),
                                    log_file=self.base_dir / f"{node}.log")
            self.handles.append(handle)
        launcher.wait_until_healthy(
            self.broker_handles[0],
            lambda: health.kafka_brokers_ready(self.bootstrap_servers, self.broker_count),
            timeout=timeout, what=f"Kafka cluster {self.name} ({self.broker_count} brokers)")
        for handle in self.broker_handles[1:]:  # a dead broker would not be in the metadata
            if not launcher.is_alive(handle):
                raise launcher.ServiceFailed(f"{handle.name} died: {launcher.log_tail(handle.log_file)}")
        return self

    def restart_broker(self, index: int, timeout: float = 120.0) -> None:
        """Stop broker `index` (a clean shutdown) and start it again from its
        files; back once it is registered and no partition waits for it."""
        old = self.broker_handles[index]
        launcher.stop(old)
        props = str(self.base_dir / f"broker-{index}" / "server.properties")
        jmx_port = self.jmx_ports[index] if self.jmx else None
        new = launcher.start(old.name, self.command(jvm.BROKER_MAIN, [props], jmx_port), log_file=Path(old.log_file))
        self.handles[1 + index] = new
        address, node_id = self.broker_address(index), self.CONTROLLER_ID + 1 + index
        launcher.wait_until_healthy(new, lambda: health.kafka_brokers_ready(address, 1, node_id=node_id),
                                    timeout=timeout, what=f"{old.name} restarted")

    def broker_address(self, index: int) -> str:
        return f"{HOST}:{self.broker_ports[index]}"

    def stop(self) -> None:
        # Brokers first: a broker whose controller is gone cannot shut down cleanly.
        _parallel(partial(launcher.stop, h) for h in self.broker_handles)
        if self.controller_handle:
            launcher.stop(self.controller_handle)


class ConnectGroup(_JavaService):
    """A distributed Connect worker group whose internal topics live on `kafka`."""

    def __init__(self, name: str, base_dir: Path, kafka: KafkaCluster, workers: int = 1, *,
                 jmx: bool = False, heap: str = "512m", overrides: dict[str, str] | None = None,
                 scheme: str = "http", ready=None, without_jars: tuple[str, ...] = ()):
        """`scheme` https: `overrides` carry the listener's TLS settings; `ready(url)`
        replaces the plain readiness check; `without_jars`: jar name prefixes left
        off the classpath (a worker without some plugin)."""
        super().__init__(base_dir, jmx, heap)
        self.name = name
        self.kafka = kafka
        self.workers = workers
        self.scheme = scheme
        self.ready = ready or readiness.connect_ready
        self.overrides = {"offset.flush.interval.ms": "2000", **(overrides or {})}
        if without_jars:
            libs = toolchain.kafka_libs()
            self.classpath = ":".join(str(j) for j in sorted(libs.glob("*.jar")) if not j.name.startswith(without_jars))
        ports = free_ports(workers * (2 if jmx else 1))
        self.rest_ports, self.jmx_ports = ports[:workers], ports[workers:]

    @property
    def rest_urls(self) -> list[str]:
        return [f"{self.scheme}://{HOST}:{port}" for port in self.rest_ports]

    @property
    def rest_url(self) -> str:
        return self.rest_urls[0]

    def start(self, timeout: float = 120.0) -> ConnectGroup:
        for i, port in enumerate(self.rest_ports):
            props = connect.worker_properties(
                f"connect-{self.name}", bootstrap_servers=self.kafka.bootstrap_servers, host=HOST,
                rest_port=port, kafka_broker_count=self.kafka.broker_count, overrides=self.overrides)
            props["listeners"] = props["listeners"].replace("http://", f"{self.scheme}://")
            path = _write(self.base_dir / f"worker-{i}.properties", render_properties(props))
            jmx_port = self.jmx_ports[i] if self.jmx else None
            self.handles.append(launcher.start(
                f"{self.name}/worker-{i}", self.command(jvm.CONNECT_DISTRIBUTED_MAIN, [path], jmx_port),
                log_file=self.base_dir / f"worker-{i}.log"))
        for handle, url in zip(self.handles, self.rest_urls):
            launcher.wait_until_healthy(handle, partial(self.ready, url), timeout=timeout,
                                        what=f"Connect worker {handle.name} REST at {url}")
        return self


class PrometheusServer:
    def __init__(self, base_dir: Path, jobs: dict[str, list[str]], *, scrape_interval: str = "2s",
                 labels: dict[str, dict[str, str]] | None = None):
        self.base_dir = Path(base_dir)
        self.binary = toolchain.prometheus_binary()
        labels = labels or {}
        targets = [ScrapeTarget(job, address, labels.get(job, {})) for job, addresses in jobs.items()
                   for address in addresses]
        self.config_file = _write(self.base_dir / "prometheus.yml",
                                  prometheus_config(targets, scrape_interval=scrape_interval))
        self.port = free_ports(1)[0]
        self.handle: launcher.ProcessHandle | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self, timeout: float = 60.0) -> PrometheusServer:
        argv = [self.binary, f"--config.file={self.config_file}",
                f"--storage.tsdb.path={self.base_dir / 'data'}",
                f"--web.listen-address={HOST}:{self.port}"]
        self.handle = launcher.start("prometheus", argv, log_file=self.base_dir / "prometheus.log",
                                     cwd=self.base_dir)
        launcher.wait_until_healthy(self.handle, lambda: health.http_ok(f"{self.url}/-/ready"),
                                    timeout=timeout, what=f"Prometheus at {self.url}")
        return self

    def query(self, expr: str) -> list[dict]:
        reply = requests.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=5)
        reply.raise_for_status()
        return reply.json()["data"]["result"]

    def stop(self) -> None:
        if self.handle:
            launcher.stop(self.handle)
