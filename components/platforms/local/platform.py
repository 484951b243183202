"""The `local` platform: services are JVMs (from .tools/kafka) on 127.0.0.1.

Ports are deterministic per stack and per service (a hash, probed on clash),
so adding a cluster never moves the ports of the others.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pulumi

from mirrorstack import toolchain, versions
from mirrorstack.platforms.base import (UnsupportedService, default_port_base, fill_dir, hashed_host_port,
                                        no_node_ports, python_service_config, run_in_turn)
from mirrorstack.platforms.descriptions import (JavaService, ProcessService, PythonModuleService, Ran, Service,
                                                ServiceSet, SparkJob, WrittenFiles)
from mirrorstack.platforms.java_service import JavaRuntime, java_service
from mirrorstack.platforms.local import keeper
from mirrorstack.platforms.local.files import LocalFiles
from mirrorstack.platforms.local.service import LocalService
from mirrorstack.platforms.local.handed_out_job import HandedOutSparkJob
from mirrorstack.platforms.local.spark_job import LocalSparkJob

JOB_TIMEOUT_MARGIN = 3600  # on top of the job's wait bound: reading and comparing

HOST = "127.0.0.1"


class LocalPlatform:  # a Platform (components/platforms/base.py)
    name = "local"
    listen_host = HOST  # services bind loopback only

    def __init__(self, stack: str, base_dir: str, port_base: int | None = None):
        self.base_dir = Path(base_dir).resolve()
        self.port_base = port_base if port_base is not None else default_port_base(stack)
        self._ports: dict[str, int] = {}

    def address(self, service: str, port_name: str) -> tuple[str, int]:
        key = f"{service}/{port_name}"
        if key not in self._ports:
            self._ports[key] = hashed_host_port(self.port_base, key, set(self._ports.values()))
        return HOST, self._ports[key]

    node_port = no_node_ports("local")

    def rack(self) -> str | None:
        return None  # one machine: no zones


    def host_url(self, service: str, port_name: str) -> str:
        return "http://%s:%d" % self.host_address(service, port_name)

    def host_address(self, service: str, port_name: str) -> tuple[str, int]:
        """How this machine (the Pulumi program, the MM2 resource) reaches the
        port; on local it is the address the services use among themselves."""
        return self.address(service, port_name)

    def admin_listener(self, service: str) -> None:
        return None  # INTERNAL is on 127.0.0.1 already

    def client_login(self, service: str, port_name: str) -> None:
        return None  # a broker's own start logs in as the stack's users (kafka/sasl_check.py)

    def started(self, ran):
        raise NotImplementedError("local: no program-side login check (client_login is None)")

    def service_dir(self, service: str) -> str:
        return str(self.base_dir / service)

    def data_dir(self, service: str) -> str:
        return str(self.base_dir / service / "data")

    def metrics_address(self, service: str) -> tuple[str, int]:
        """Where Prometheus scrapes the service's JMX exporter."""
        return self.address(service, "metrics")

    def client_dir(self, alias: str) -> str:
        """The folder of a cluster's client files (CA, client key, secret settings)."""
        return str(self.base_dir / "clients" / alias)

    def client_files(self, alias: str, files, opts: pulumi.ResourceOptions | None = None) -> LocalFiles:
        """Write a cluster's client files (a secret dict) 0600 into `client_dir`."""
        return LocalFiles(f"{alias}-client-files", folder=self.client_dir(alias), files=files, secret=True, opts=opts)

    def run_set(self, services: ServiceSet, *, first_after=(), each_after=(), then=None,
                opts: pulumi.ResourceOptions | None = None) -> list[LocalService]:
        """The members as JVMs on this host, one at a time (base.run_in_turn).
        Of a member's `resources` only the heap applies here (no container);
        `group` does not (one host, no scheduler), nor `keeps_data` (its folder
        stays). `uses_clients`' folders are on this host already. A broker's
        `health_secrets` (its SASL users) must authenticate on its client listener
        at each start (kafka/sasl_check.py)."""
        return run_in_turn(services.members, lambda member, depends: self._run_member(
            member, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=depends))),
            first_after=first_after, each_after=each_after, then=then)

    def _run_member(self, member: JavaService, opts: pulumi.ResourceOptions) -> LocalService:
        folder = self.service_dir(member.name)
        spec = java_service(
            self._runtime(member.metrics), folder=folder, main=member.main, args=member.args, files=member.files,
            heap=member.resources.heap, user_jvm_options=member.resources.jvm_options,
            prepare=member.prepare, after_start=member.after_start, jvm_options=member.jvm_options,
            metrics=(*self.metrics_address(member.name), member.metrics) if member.metrics else None)
        return LocalService(
            member.name, workdir=folder, files=spec.files, argv=spec.argv, prepare=spec.prepare,
            after_start=spec.after_start or None, secret_files=member.secret_files, health=member.health,
            health_secrets=member.health_secrets, opts=opts)

    @staticmethod
    def _runtime(metrics: str | None) -> JavaRuntime:
        """This host's java and Kafka jars from .tools (the JMX agent too, when needed)."""
        return JavaRuntime(java=toolchain.java_binary(), kafka_libs=str(toolchain.kafka_libs()),
                           jmx_agent=str(toolchain.jmx_agent_jar()) if metrics else None)

    def run_job(self, name: str, *, job: SparkJob, config, settings,
                uses_clients: list[str] = (), opts: pulumi.ResourceOptions | None = None) -> LocalSparkJob:
        """Run the validation job with this project's PySpark; `report` is its summary.
        (`uses_clients`' folders are on this host already.) With `submit: yourself`, hand it
        out instead: its files and spark-submit line, its report read by a later `up`."""
        if settings.submit == "yourself":
            return HandedOutSparkJob(
                # not the run job's folder: that one goes when a stack switches from it to this
                name, job=job, config=config, workdir=str(self.base_dir / f"{name}-submit"), run_id=settings.run_id,
                report_only=settings.report_only, report_within_seconds=settings.report_within_hours * 3600,
                spark_version=versions.spark_version(), opts=opts)
        return LocalSparkJob(
            name, job=job, config=config,
            workdir=str(self.base_dir / name), report_only=settings.report_only,
            jars=",".join(str(j) for j in toolchain.spark_kafka_jars()),
            run_id=settings.run_id, driver_memory=settings.driver_memory, master=settings.master,
            java_options=settings.jvm_options, cluster=settings.standalone_executors,
            timeout_seconds=int(settings.wait_seconds) + JOB_TIMEOUT_MARGIN, opts=opts)

    def run(self, service: Service, opts: pulumi.ResourceOptions | None = None) -> Ran:
        """A process on 127.0.0.1 (a ProcessService, mirrorstack's Python), or
        WrittenFiles in the service's folder; images run in containers only (the
        model refuses the extras that are images here)."""
        folder = self.service_dir(service.name)
        if isinstance(service, ProcessService):
            resource = LocalService(
                service.name, workdir=folder, files={k: fill_dir(v, folder) for k, v in service.files.items()},
                argv=[arg.replace("{dir}", folder) for arg in service.argv], health=dict(service.health), opts=opts)
            return Ran(resource, None, service.url)
        if isinstance(service, PythonModuleService):
            return self._run_python(service, folder, opts)
        if isinstance(service, WrittenFiles):
            return Ran(LocalFiles(service.name, folder=folder, files=service.files, opts=opts), None, None)
        raise UnsupportedService(self.name, service, fix="platform docker or kubernetes")

    def _run_python(self, service: PythonModuleService, folder: str, opts) -> Ran:
        """The program's own Python (the module is installed here), under a keeper
        that starts it again whenever it exits, as the containers' restart policy
        does (keeper.POLICY)."""
        host, port = self.address(service.name, "metrics")
        secrets_file = f"{folder}/secrets/config.json" if service.secret_config is not None else None
        # Its state beside its config: the service's folder stays as long as the service.
        spark = ({"spark_jars": [str(jar) for jar in toolchain.spark_kafka_jars()], "state_dir": folder}
                 if service.runs_spark else None)
        files = {"config.json": pulumi.Output.from_input(service.config).apply(
            lambda c: python_service_config(c, f"{host}:{port}", secrets_file, spark))}
        secret_files = None if service.secret_config is None else pulumi.Output.secret(
            pulumi.Output.from_input(service.secret_config).apply(lambda c: {"secrets/config.json": json.dumps(c)}))
        resource = LocalService(
            service.name, workdir=folder, files=files, secret_files=secret_files,
            argv=[sys.executable, "-m", service.module, f"{folder}/config.json"],
            health={"kind": "http", "url": f"http://{host}:{port}/healthz"}, restart=keeper.POLICY, opts=opts)
        return Ran(resource, (host, port), f"http://{host}:{port}")

    def switch_runner(self, aliases) -> None:
        return None  # the clusters answer on this machine: the switch runs in the program
