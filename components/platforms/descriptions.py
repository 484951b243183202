"""What the concept folders hand a platform: descriptions of what to run and
what a run serves, as data. A platform turns them into processes, containers or
Kubernetes objects; it never imports the folder that made them (kafka/,
connect/, mirror/, monitoring/, validation/, the model's spec).

Readiness is data too: a health spec is a dict of strings with a `kind` (a
probe every platform knows: tcp, http, kafka, controller, connect), and, where
the concept owns a check a process platform runs (a broker's SASL users), a
`reference` to its function, which the platform resolves by name when it runs
it: in a Pulumi dynamic provider's process, from pickled inputs, as in the
program. A concept's check of a whole kind (Connect's REST API for `connect`)
is a `mirrorstack.health_checks` entry point named after the kind, and one run
once a service is healthy where its spec holds a key (a broker's SASL users,
`sasl.bootstrap`) a `mirrorstack.once_healthy` entry point named after the key:
the spec, and so a deployed stack's state, stays as it was before the checks
moved out of the platforms.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
from importlib import metadata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

from mirrorstack.platforms.base import ServiceGroup

# Health spec keys naming a concept's own check (`reference`s):
CHECK = "check"  # (spec, since_ms) -> bool; False or NotReady: not yet (instead of the kind's probe)
ONCE_HEALTHY = "once_healthy"  # (name, spec, secrets, *, alive, log_file): after the start, raises to fail it
TOOLS_CONFIG = "tools_config"  # the service's file of client settings for Kafka's tools on its listener


HEALTH_CHECK_ENTRY_POINTS = "mirrorstack.health_checks"  # kind → (spec, since_ms) -> bool
ONCE_HEALTHY_ENTRY_POINTS = "mirrorstack.once_healthy"  # spec key → what ONCE_HEALTHY names


@functools.cache
def _declared(group: str) -> dict[str, tuple[metadata.EntryPoint, ...]]:
    """name → the entry points of `group`, read once per process: a health
    check runs every fraction of a second while a service starts, and one
    read of the installed packages' metadata takes about 9 ms."""
    found: dict[str, tuple[metadata.EntryPoint, ...]] = {}
    for entry in metadata.entry_points(group=group):
        found[entry.name] = (*found.get(entry.name, ()), entry)
    return found


def _registered(group: str, name: str) -> Callable | None:
    found = _declared(group).get(name, ())
    if len({entry.value for entry in found}) > 1:
        raise ValueError(f"{group} {name!r} has {len(found)} functions ({', '.join(e.value for e in found)}); "
                         f"fix: uninstall all but one of the packages that declare it")
    return found[0].load() if found else None


def check_of_kind(kind: str) -> Callable | None:
    """The check a concept registered for a health kind (an entry point of
    HEALTH_CHECK_ENTRY_POINTS named `kind`); None: the platform's own probe."""
    return _registered(HEALTH_CHECK_ENTRY_POINTS, kind)


def once_healthy_checks(spec: Mapping[str, str]) -> list[Callable]:
    """What runs once a service with this health spec is healthy: the function
    its ONCE_HEALTHY names, and each registered for a key the spec holds."""
    named = [resolve(spec[ONCE_HEALTHY])] if ONCE_HEALTHY in spec else []
    keys = set(_declared(ONCE_HEALTHY_ENTRY_POINTS)) & set(spec)
    return named + [_registered(ONCE_HEALTHY_ENTRY_POINTS, key) for key in sorted(keys)]


class NotReady(Exception):
    """A check's answer "not yet", saying what it waits for (shown as progress)."""


def first_few(names: list[str], shown: int = 3) -> str:
    """What a progress line names of a long list."""
    return ", ".join(names[:shown]) + (", …" if len(names) > shown else "")


def reference(function: Callable) -> str:
    """`module:name` of a module-level function: how a health spec names a
    check (a string survives pickling and Pulumi's state; `resolve` finds it)."""
    ref = f"{function.__module__}:{function.__qualname__}"
    if resolve(ref) is not function:
        raise ValueError(f"{ref} is not a module-level function")
    return ref


def resolve(ref: str) -> Callable:
    """The function a `reference` names, imported by name where it runs."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


class Images(Protocol):
    """The images a container platform runs (the model's Images: the topology's `images:`)."""

    def of(self, key: str) -> str: ...


class JvmResources(Protocol):
    """What a platform reads of a JVM's resources (the model's Resources)."""
    heap: str
    cpus: float | None
    jvm_options: Sequence[str]

    @property
    def container_memory_mib(self) -> int: ...


@dataclass(frozen=True)
class ScrapeTarget:
    """A /metrics endpoint Prometheus scrapes: the JMX exporter of a broker,
    controller or worker, a supervisor, or a platform's extra (kafka-exporter)."""
    job: str                        # kafka-<alias> | connect-<name> | supervisor-<name> | kafka-exporter-<alias>
    address: str                    # host:port of the endpoint
    labels: Mapping[str, str] = field(default_factory=dict)  # cluster, role, connect


@dataclass(frozen=True)
class ImageService:
    """A service that runs an image as it is, set up by its arguments,
    environment and files (Prometheus, Grafana, Kafka UI, kafka-exporter): what
    a container platform runs. Values may be Outputs (a cluster's bootstrap
    servers, a file generated from other resources' outputs)."""
    name: str
    image: str                      # its key in the topology's `images:`
    port: int                       # where it serves HTTP inside its container
    args: object = None             # its arguments (a list, or an Output of one); None: the image's own
    env: tuple[tuple[str, object], ...] = ()  # (name, value) pairs, in order
    user: int | None = None         # the uid its image runs as (a pod's securityContext)
    publish: bool = False           # reached from this machine too (docker: published on 127.0.0.1)
    files: Mapping[str, object] = field(default_factory=dict)  # key (a relative name) → content
    secret_files: Mapping[str, object] = field(default_factory=dict)  # key → secret content (read-only to it)
    paths: Mapping[str, str] = field(default_factory=dict)  # key of files or secret_files → its path in the container
    scratch: str | None = None      # a folder it writes that need not outlive it (kubernetes: an emptyDir)


@dataclass(frozen=True)
class ProcessService:
    """A program of this machine's toolchain run as a process (Prometheus on a
    platform without containers): `argv` and `files` may use `{dir}`, the
    service's own folder; ready when `health` holds; `url` where it serves."""
    name: str
    argv: Sequence[str]
    files: Mapping[str, object]
    health: Mapping[str, str]
    url: str


@dataclass(frozen=True)
class PythonModuleService:
    """A long-running process of mirrorstack's own Python, `python -m module
    <config.json>` (a process platform: the program's own Python; containers: the
    spark image's python3 with the `ships` modules' source). `config` (a dict,
    may be an Output) is written with `listen` ("host:port" it serves /healthz
    and /metrics on) and `secrets_file` (where the 0600 JSON of `secret_config`
    is, else None) added; with `runs_spark` also `spark_jars` (the paths of the Kafka source's jars
    where it runs) and `state_dir` (a folder of its own it may write, kept when it restarts; its
    executors', with `executor_pods`, too); with `executor_pods` (kubernetes) its Spark driver starts
    executor pods, and `spark_conf` (their settings) is added. `uses_clients`: the aliases whose client
    folders (client_dir) it reads, there where it runs (its executors too)."""
    name: str
    module: str
    ships: Sequence[str]
    config: object
    secret_config: object = None
    runs_spark: bool = False
    executor_pods: "SparkExecutorPods | None" = None
    uses_clients: Sequence[str] = ()


@dataclass(frozen=True)
class SparkExecutorPods:
    """A service's Spark driver that starts executor pods (a `k8s://` master): their container's
    command file (`script`), the RBAC rules the driver needs, and `conf(ExecutorPods)`, the session's
    settings for them."""
    script: str
    driver_rules: tuple[dict, ...]
    conf: Callable[["ExecutorPods"], dict[str, str]]


@dataclass(frozen=True)
class WrittenFiles:
    """Files written to the service's folder for a person to use where the
    platform cannot run the service itself (Grafana's provisioning on a platform
    without containers)."""
    name: str
    files: Mapping[str, object]


Service = ImageService | ProcessService | PythonModuleService | WrittenFiles


class Ran(NamedTuple):
    """What `Platform.run` made: the resource (what depends on the service waits
    for it), where services reach it (host, port) and its URL from this machine
    where it is published (else the in-network one; None: it serves nothing)."""
    resource: object
    address: tuple[str, int] | None
    url: str | None


class JobOutput(NamedTuple):
    """How a run-once job's output is read and said, in the job's own words
    (validation/outcome.py has the validation job's): the platform runs the job,
    passes on its progress lines and fails `up` with these messages. It travels
    into a dynamic resource's provider, pickled: a tuple of functions named by
    reference (no dict: pulumi's pickler wraps every dict's items once more per
    provider it has serialised in the process)."""
    failed_exit: int                                  # the exit code of a run that found failures
    is_progress: Callable[[str], bool]                # a line worth showing while it runs
    printed_outcome: Callable[[list[str]], dict | None]  # the summary it printed: status, passed, failures
    failed_message: Callable[[str, str, list[str]], str]  # (name, where its report is, failures)
    could_not_run_message: Callable[..., str]         # (name, exit code, its lines, hint="")
    report_summary: Callable[[dict], dict]            # its report file's summary (status, passed, failures...)
    # (where its config says it sends its report, the run's key, seconds to wait, since_ms=when the run
    # began) -> the report, None when none came; LookupError: that channel cannot be read from here
    read_report: Callable[..., dict | None] | None = None
    # the report it printed on its output's marked line (a platform reading its output), None if none
    printed_report: Callable[[list[str]], dict | None] | None = None

    def printed_summary(self, lines: list[str]) -> dict:
        """The stack output of a run that ended well, from its output: the summary of the report it
        printed (as a run whose report came by its topic), else of its summary lines (status, passed,
        failures)."""
        report = self.printed_report(lines) if self.printed_report else None
        if report is not None:
            return self.report_summary(report)
        outcome = self.printed_outcome(lines) or {"status": "passed", "passed": True, "failures": []}
        return {"status": outcome["status"], "passed": outcome["passed"], "failures": outcome["failures"]}


# A driver pod's own name and IP, in its container's environment: spark-submit's line names them as
# $(POD_NAME) and $(POD_IP), which Kubernetes fills in.
POD_NAME_ENV, POD_IP_ENV = "POD_NAME", "POD_IP"


@dataclass(frozen=True)
class ExecutorPods:
    """Where a Spark job's executor pods go (a `k8s://` master): the namespace, their image, the pod
    template file as the driver sees it, and the CPU each requests."""
    namespace: str
    image: str
    template_path: str
    cpu_request: str


@dataclass(frozen=True)
class SparkJob:
    """A PySpark job run once per change of its inputs: `entry` (spark-submit's
    main file) and its package (`zip_bytes`, named `zip_name`, on --py-files;
    `make_zip` builds it again where the job runs on this machine),
    `submit_argv(settings, *, job_path, config_path, jars, py_files, executor_pods)`
    the spark-submit line in an image, and `output`, how its output is read."""
    entry: Path
    zip_bytes: bytes
    zip_name: str
    make_zip: Callable[[], bytes]
    submit_argv: Callable[..., list[str]]
    output: JobOutput
    # Executor pods (`submit_argv(..., executor_pods=ExecutorPods)`): their container's command file,
    # and the RBAC rules the driver needs to start them.
    executor_script: str = ""
    driver_rules: tuple[dict, ...] = ()
    # The spark-submit line for a Spark the platform does not run (keyword arguments: job_file,
    # config_file, zip_file, report_key, spark_version).
    hand_out_argv: Callable[..., list[str]] | None = None

    @property
    def entry_text(self) -> str:
        return self.entry.read_text()

    @property
    def sha256(self) -> str:
        """Of the main file and the zip: a change to any module re-runs the job."""
        return hashlib.sha256(self.entry.read_bytes() + b"\0" + self.zip_bytes).hexdigest()


@dataclass(frozen=True)
class JavaService:
    """One member of a ServiceSet: one of Kafka's main classes, as data.

    `args`, `prepare` (steps before the start, e.g. the storage format),
    `after_start` (steps once it answers) and `jvm_options` (`-D...` of its
    JVM) may use `{dir}`, the service's own folder, where `files` and the 0600
    `secret_files` (a secret dict, every path `secrets/<name>`) are. `health`:
    its readiness spec (see the module's text); `health_secrets` (a secret dict):
    what a platform that checks in the service's own start needs beyond it (a
    broker's SASL users). `uses_clients`: the aliases whose client folders it
    reads. `metrics`: the JMX exporter's config, served on the platform's
    `metrics_address(name)`; None runs no exporter. `keeps_data`: its data
    folder (`data_dir(name)`) outlives restarts and replacements (a volume where
    the platform has them). `node_ports`: port name → the node port it is also
    published on (only where the platform has NodePorts; `node_port` gave its
    listener). File values may be Outputs."""
    name: str
    main: str
    args: Sequence[str]
    files: Mapping[str, object]
    health: Mapping[str, str]
    resources: JvmResources
    prepare: Sequence[tuple[str, list[str]]] = ()
    after_start: Sequence[tuple[str, list[str]]] = ()
    jvm_options: Sequence[str] = ()
    secret_files: object = None
    health_secrets: object = None
    uses_clients: Sequence[str] = ()
    metrics: str | None = None
    keeps_data: bool = False
    node_ports: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ServiceSet:
    """A set's members described at once (a cluster's brokers or controllers, a
    Connect group's workers), run one at a time in order: a rolling restart, on
    create too. `group` says which set (a scheduling platform labels the members,
    spreads them and lets at most one be disrupted)."""
    group: ServiceGroup
    members: tuple[JavaService, ...]
