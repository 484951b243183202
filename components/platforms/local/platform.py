"""The `local` platform: services are JVMs (from .tools/kafka) on 127.0.0.1.

Ports are deterministic per stack and per service (a hash, probed on clash),
so adding a cluster never moves the ports of the others.
"""
from __future__ import annotations

import zlib
from pathlib import Path

import pulumi

from components import toolchain
from components.config import jvm
from components.config.logging import log4j2_properties
from components.platforms.local.service import LocalService
from components.platforms.local.spark_job import LocalSparkJob

ROOT = Path(__file__).resolve().parents[3]
JOB_TIMEOUT_MARGIN = 3600  # on top of the job's wait bound: reading and comparing

HOST = "127.0.0.1"
PORT_SPAN = 5000


def default_port_base(stack: str) -> int:
    """10000-29999, below Linux's ephemeral range so clients never hold our ports."""
    return 10000 + (zlib.crc32(stack.encode()) % 4) * PORT_SPAN


class LocalPlatform:
    name = "local"
    listen_host = HOST  # services bind loopback only

    def __init__(self, stack: str, base_dir: str, port_base: int | None = None):
        self.base_dir = Path(base_dir).resolve()
        self.port_base = port_base if port_base is not None else default_port_base(stack)
        self._ports: dict[str, int] = {}

    def address(self, service: str, port_name: str) -> tuple[str, int]:
        key = f"{service}/{port_name}"
        if key not in self._ports:
            taken = set(self._ports.values())
            port = self.port_base + zlib.crc32(key.encode()) % PORT_SPAN
            while port in taken:
                port = self.port_base + (port - self.port_base + 1) % PORT_SPAN
            self._ports[key] = port
        return HOST, self._ports[key]

    def host_address(self, service: str, port_name: str) -> tuple[str, int]:
        """How this machine (the Pulumi program, the MM2 resource) reaches the
        port; on local it is the address the services use among themselves."""
        return self.address(service, port_name)

    def service_dir(self, service: str) -> str:
        return str(self.base_dir / service)

    def data_dir(self, service: str) -> str:
        return str(self.base_dir / service / "data")

    def _java(self, service: str, main: str, args: list[str], heap: str, short_lived: bool = False) -> list[str]:
        return jvm.java_command(toolchain.java_binary(), main, args, classpath=toolchain.kafka_classpath(),
                                heap=heap, log4j_file=f"{self.service_dir(service)}/log4j2.properties",
                                short_lived=short_lived)

    def run_kafka_java(self, service: str, *, main: str, args: list[str], files: dict[str, str],
                       health: dict[str, str], heap: str = "512m", prepare: list[tuple[str, list[str]]] = (),
                       opts: pulumi.ResourceOptions | None = None) -> LocalService:
        """Run one of Kafka's main classes. `args` and `prepare` may use `{dir}`
        for the service's own folder, where `files` are written."""
        folder = self.service_dir(service)
        fill = lambda items: [a.replace("{dir}", folder) for a in items]  # noqa: E731
        return LocalService(
            service, workdir=folder, files={"log4j2.properties": log4j2_properties(), **files},
            argv=self._java(service, main, fill(args), heap),
            prepare=[self._java(service, m, fill(a), "256m", short_lived=True) for m, a in prepare],
            health=health, opts=opts)

    def run_spark_job(self, name: str, *, job_file: Path, job_sha256: str, config, settings,
                      opts: pulumi.ResourceOptions | None = None) -> LocalSparkJob:
        """Run the validation job with this project's PySpark; `report` is its summary."""
        return LocalSparkJob(
            name, job_file=str(job_file), job_sha256=job_sha256, config=config,
            workdir=str(self.base_dir / name), cwd=str(ROOT), report_only=settings.report_only,
            run_id=settings.run_id, driver_memory=settings.driver_memory, master=settings.master,
            timeout_seconds=int(settings.wait_seconds) + JOB_TIMEOUT_MARGIN, opts=opts)
