"""A Platform (mirrorstack.platforms.base) that runs nothing: every service it
is asked to run becomes a record of what was asked (the command lines Kafka's
main classes would run with, the files, ports, the set it is a member of), and
Connect's REST API is answered by a stub that keeps the connectors it is given."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pulumi

from mirrorstack import naming
from mirrorstack.platforms.base import (UnsupportedService, default_port_base, hashed_host_port, no_node_ports,
                                        run_in_turn)
from mirrorstack.platforms.descriptions import (JavaService, ProcessService, PythonModuleService, Ran, ServiceSet,
                                                WrittenFiles)
from mirrorstack.platforms.java_service import JavaRuntime, java_service
from recording_platform import connect_stub
from recording_platform.recorded import Recorded

HOST = "127.0.0.1"
# Where a host of this platform would keep java and Kafka's jars: they only appear in the command lines.
RUNTIME = JavaRuntime(java="/opt/java/bin/java", kafka_libs="/opt/kafka/libs", jmx_agent="/opt/jmx/agent.jar")


def make(stack: str, *, local_dir: str, port_base: int | None = None, **_) -> RecordingPlatform:
    return RecordingPlatform(stack, local_dir, port_base=port_base)


class RecordingPlatform:
    name = "recording"
    listen_host = HOST

    def __init__(self, stack: str, folder: str, port_base: int | None = None):
        self.folder = Path(folder).resolve()
        self.records = str(self.folder / "recording")
        self.port_base = port_base if port_base is not None else default_port_base(stack)
        self._ports: dict[str, int] = {}
        self._connect = connect_stub.Connectors(self.folder / "connect" / "connectors.json")
        self._stubs: dict[tuple[str, int], object] = {}

    # where things are
    def address(self, service: str, port_name: str) -> tuple[str, int]:
        key = f"{service}/{port_name}"
        if key not in self._ports:
            self._ports[key] = hashed_host_port(self.port_base, key, set(self._ports.values()))
        return HOST, self._ports[key]

    def host_address(self, service: str, port_name: str) -> tuple[str, int]:
        return self.address(service, port_name)

    def host_url(self, service: str, port_name: str) -> str:
        """Connect's REST API (the only URL the program asks for), answered by the stub."""
        address = self.address(service, port_name)
        if address not in self._stubs:
            self._stubs[address] = connect_stub.serve(self._connect, *address)
        return "http://%s:%d" % address

    def metrics_address(self, service: str) -> tuple[str, int]:
        return self.address(service, "metrics")

    def admin_listener(self, service: str) -> None:
        return None

    def client_login(self, service: str, port_name: str) -> None:
        return None  # no broker runs: nothing to log in to

    def started(self, ran):
        return ran.urn

    def rack(self) -> None:
        return None

    node_port = no_node_ports("recording")

    def service_dir(self, service: str) -> str:
        return str(self.folder / service)

    def data_dir(self, service: str) -> str:
        return str(self.folder / service / "data")

    def client_dir(self, alias: str) -> str:
        return str(self.folder / "clients" / alias)

    # what it is asked to run
    def _record(self, service: str, kind: str, opts, **asked) -> Recorded:
        ports = {key.split("/", 1)[1]: port for key, port in self._ports.items() if key.split("/", 1)[0] == service}
        name = naming.prefix_of(opts.parent if opts else None) + f"recorded-{service}"
        return Recorded(name, folder=self.records, service=service, kind=kind, ports=ports, opts=opts, **asked)

    def client_files(self, alias: str, files, opts=None) -> Recorded:
        names = pulumi.Output.from_input(files).apply(lambda f: sorted(f or {}))
        return self._record(f"{alias}-client-files", "client-files", opts, files=names)

    def run_set(self, services: ServiceSet, *, first_after=(), each_after=(), then=None, opts=None) -> list[Recorded]:
        group = {k: v for k, v in dataclasses.asdict(services.group).items() if v is not None}
        return run_in_turn(services.members, lambda member, depends: self._run_member(
            member, group, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=depends))),
            first_after=first_after, each_after=each_after, then=then)

    def _run_member(self, member: JavaService, group: dict, opts) -> Recorded:
        spec = java_service(RUNTIME, folder=self.service_dir(member.name), main=member.main, args=member.args,
                            files=member.files, heap=member.resources.heap,
                            user_jvm_options=member.resources.jvm_options, prepare=member.prepare,
                            after_start=member.after_start, jvm_options=member.jvm_options,
                            metrics=(*self.metrics_address(member.name), member.metrics) if member.metrics else None)
        secret_names = (pulumi.Output.from_input(member.secret_files).apply(lambda f: sorted(f or {}))
                        if member.secret_files is not None else [])
        return self._record(member.name, "java", opts, main=member.main, argv=spec.argv, prepare=spec.prepare,
                            after_start=spec.after_start, files=spec.files, secret_files=secret_names,
                            health=member.health, uses_clients=list(member.uses_clients),
                            keeps_data=member.keeps_data, group=group)

    def run_job(self, name: str, *, job, config, settings, uses_clients=(), opts=None) -> Recorded:
        argv = job.submit_argv(settings, job_path=f"{self.service_dir(name)}/{job.entry.name}",
                               config_path=f"{self.service_dir(name)}/flows.json", jars=[],
                               py_files=[f"{self.service_dir(name)}/{job.zip_name}"])
        return self._record(name, "spark-job", opts, argv=argv, job_sha256=job.sha256, config=config,
                            uses_clients=list(uses_clients))

    def run(self, service, opts=None) -> Ran:
        """A record of the service: mirrorstack's Python, a process or written files; no images."""
        if isinstance(service, PythonModuleService):
            host, port = self.address(service.name, "metrics")
            resource = self._record(service.name, "python", opts, argv=["python3", "-m", service.module, "config.json"],
                                    config=service.config, ships=list(service.ships), listen=f"{host}:{port}")
            return Ran(resource, (host, port), f"http://{host}:{port}")
        if isinstance(service, ProcessService):
            return Ran(self._record(service.name, "process", opts, argv=list(service.argv), files=dict(service.files),
                                    health=dict(service.health)), None, service.url)
        if isinstance(service, WrittenFiles):
            return Ran(self._record(service.name, "files", opts, files=dict(service.files)), None, None)
        raise UnsupportedService(self.name, service)

    def switch_runner(self, aliases) -> None:
        return None
