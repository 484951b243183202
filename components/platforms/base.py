"""What every platform is: the `Platform` Protocol that local, docker and
kubernetes implement, and the helpers they share (never imported sideways
from a sibling platform).

A platform runs a service its own way (a process, a container, a pod); it
knows how to run one, never what Kafka is. The components call only what the
Protocol names.
"""
from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from mirrorstack.platforms.descriptions import JavaService, Ran, Service, ServiceSet, SparkJob

PORT_SPAN = 5000  # ports of one stack: port_base .. port_base + PORT_SPAN - 1
# How long a stopped service (TERM) may take before it is killed, on local and docker (kubernetes:
# the pods' termination grace, 60 s by default). A Connect worker stops its connectors, then its
# tasks, each within task.shutdown.graceful.timeout.ms (10 s), and its tasks commit their offsets
# as they stop: killed sooner, they skip that commit and their next owner copies records again.
STOP_GRACE_SECONDS = 30


def default_port_base(stack: str) -> int:
    """10000-29999, below Linux's ephemeral range so clients never hold our ports."""
    return 10000 + (zlib.crc32(stack.encode()) % 4) * PORT_SPAN


def hashed_host_port(port_base: int, key: str, taken: set[int]) -> int:
    """A port deterministic per stack and key, probed on clash: adding a
    service never moves the ports of the others."""
    port = port_base + zlib.crc32(key.encode()) % PORT_SPAN
    while port in taken:
        port = port_base + (port - port_base + 1) % PORT_SPAN
    return port


def python_service_config(config: dict, listen: str, secrets_file: str | None, spark: dict | None = None) -> str:
    """A PythonModuleService config as written, with where it listens and its secrets are (and, for one
    that runs Spark, `spark`: its `spark_jars` and `state_dir`)."""
    import json
    return json.dumps({**config, "listen": listen, "secrets_file": secrets_file, **(spark or {})},
                      indent=2, sort_keys=True)


def fill_dir(content, folder: str):
    """`{dir}` in a file's content replaced by `folder`; the content may be an
    Output (a file generated from other resources' outputs)."""
    if isinstance(content, str):
        return content.replace("{dir}", folder)
    import pulumi
    return pulumi.Output.from_input(content).apply(lambda text: text.replace("{dir}", folder))


def run_in_turn(members: Sequence[JavaService], run_member: Callable[[JavaService, list], Any], *,
                first_after: Sequence[Any] = (), each_after: Sequence[Any] = (),
                then: Callable[[JavaService, Any], Any] | None = None) -> list[Any]:
    """A set's members one at a time (rolling restarts, on create too): each
    `run_member(member, depends_on)` waits for `each_after` and the one before
    (its `then` resource where it made one; the first: `first_after`), and the
    engine starts a resource only once its dependencies are done."""
    ran: list[Any] = []
    gate = list(first_after)
    for member in members:
        ran.append(run_member(member, [*each_after, *gate]))
        made = then(member, ran[-1]) if then is not None else None
        gate = [made if made is not None else ran[-1]]
    return ran


class UnsupportedService(ValueError):
    """A service of a kind this platform does not run (the model refuses it first)."""

    def __init__(self, platform: str, service, fix: str = "a platform that does (model/capabilities.py)"):
        kind = {"ImageService": "images", "ProcessService": "processes", "WrittenFiles": "written files"}.get(
            type(service).__name__, type(service).__name__)
        super().__init__(f"{service.name}: the {platform} platform runs no {kind}; fix: {fix}")


class NodePortsUnsupported(ValueError):
    def __init__(self, platform: str):
        super().__init__(f"NodePorts exist on kubernetes only, not on {platform}: remove clusters.<alias>.node_ports")


def no_node_ports(platform: str):
    """`node_port` of a platform without NodePorts."""
    def node_port(self, service: str, port_name: str, node_port: int) -> tuple[str, str]:
        raise NodePortsUnsupported(platform)
    return node_port


@dataclass(frozen=True)
class ClientLogin:
    """How the program reaches a broker's CLIENT listener to log in as the
    stack's users after the platform (re)started it (Platform.client_login):
    `address` ("host:port" to dial from this machine) or `tunnel` (a kube://
    or docker:// address the check opens first, platforms/tunnels.py), and `logs`: where a person reads the
    broker's log (a command)."""

    address: str | None
    tunnel: str | None
    logs: str


@dataclass(frozen=True)
class ServiceGroup:
    """The set a service is one member of: a cluster's brokers or controllers,
    or a Connect group's workers. A platform that schedules (kubernetes) labels
    the members, keeps them apart (nodes, zones) and lets at most one be
    disrupted at a time; the others ignore it."""

    role: Literal["broker", "controller", "connect"]
    cluster: str  # the Kafka cluster's alias (workers: the cluster they bootstrap to)
    connect: str | None = None  # the Connect group's name (workers only)

    @classmethod
    def brokers(cls, alias: str) -> ServiceGroup:
        return cls("broker", alias)

    @classmethod
    def controllers(cls, alias: str) -> ServiceGroup:
        return cls("controller", alias)

    @classmethod
    def workers(cls, name: str, kafka: str) -> ServiceGroup:
        return cls("connect", kafka, name)

    @property
    def name(self) -> str:
        """One name per set, never another set's: `<alias>-brokers`,
        `<alias>-controllers`, `connect-<name>-workers`."""
        return f"connect-{self.connect}-workers" if self.connect is not None else f"{self.cluster}-{self.role}s"

    @property
    def labels(self) -> dict[str, str]:
        """What every member carries, and nothing outside the set does."""
        labels = {"mirrorstack.io/cluster": self.cluster, "mirrorstack.io/role": self.role}
        if self.connect is not None:
            labels["mirrorstack.io/connect"] = self.connect
        return labels

    @property
    def sizing(self) -> dict[str, str]:
        """What a member is and the topology fields that size it (cpu, memory), for a
        message about a member that cannot run; a controller's size is mirrorstack's own."""
        if self.role == "controller":
            return {"what": f"a controller of cluster {self.cluster}"}
        section, what = ((f"connect.{self.connect}", f"a worker of Connect group {self.connect}")
                         if self.connect is not None else (f"clusters.{self.cluster}", f"a broker of cluster {self.cluster}"))
        return {"what": what, "cpu": f"{section}.resources.cpus", "memory": f"{section}.resources.memory_mib"}


@runtime_checkable
class Platform(Protocol):
    """Where a topology's services run. Addresses are (host, port) pairs;
    `{dir}` in a service's arguments and files is its own folder there."""

    name: str  # its registered name: "local" | "docker" | "kubernetes" | one a package registers
    listen_host: str  # the address services bind to

    def address(self, service: str, port_name: str) -> tuple[str, int]:
        """How services reach `port_name` of `service` among themselves."""

    def host_address(self, service: str, port_name: str) -> tuple[str, int]:
        """How this machine (the Pulumi program, its dynamic resources) reaches it."""

    def admin_listener(self, service: str) -> tuple[str, str, str | None] | None:
        """A broker's listener for this machine's ACL resource, where its
        INTERNAL one, advertised by a name only the platform's network
        resolves, is not enough (a Kafka client goes on to every broker's
        advertised address): (advertised, listen) "host:port" and the kube://
        tunnel (kube_tunnel) the resource opens first, if any; None where
        INTERNAL answers this machine as it is (local, kubernetes in-cluster)."""

    def client_login(self, service: str, port_name: str) -> ClientLogin | None:
        """Where this machine reaches `port_name` of a broker (its CLIENT
        listener) for the program's login check after each start the platform
        makes (mirrorstack.kafka.broker_logins); ask before `run_set`
        (docker may publish the port on 127.0.0.1). None where the platform
        checks in the broker's own start (local)."""

    def started(self, ran: Any) -> Any:
        """An Output of what `run_set` returned for a member that changes whenever
        `up` starts the service again (docker: the container's id, replaced;
        kubernetes: its StatefulSet's generation, rolled)."""

    def host_url(self, service: str, port_name: str) -> str:
        """The HTTP URL by which this machine reaches it (Connect's REST API):
        `http://host:port`, or a kube:// address its clients open themselves
        (components/platforms/kubernetes/tunnel.py)."""

    def metrics_address(self, service: str) -> tuple[str, int]:
        """Where Prometheus scrapes the service's JMX exporter."""

    def rack(self) -> str | None:
        """The rack (zone) of the node a service runs on, as a `${env:...}`
        reference its JVM resolves at start; None where there are no zones."""

    def node_port(self, service: str, port_name: str, node_port: int) -> tuple[str, str]:
        """kubernetes: the listener's (advertised, listen) "host:port" for the port
        published on `node_port` of every node (a member's `node_ports` asks for
        it). Other platforms raise NodePortsUnsupported (the model allows
        `node_ports` on kubernetes only)."""

    def service_dir(self, service: str) -> str:
        """The service's own folder (its files, `{dir}`)."""

    def data_dir(self, service: str) -> str:
        """Where the service keeps its data (Kafka's log dirs); a member whose
        `keeps_data` is set keeps it across restarts. Asking makes nothing."""

    def client_dir(self, alias: str) -> str:
        """The folder of a cluster's client files (CA, client key, secret settings)."""

    def client_files(self, alias: str, files, opts=None) -> Any:
        """Make a cluster's client files (a secret dict) available at `client_dir(alias)`."""

    def run_set(self, services: ServiceSet, *, first_after: Sequence[Any] = (), each_after: Sequence[Any] = (),
                then: Callable[[JavaService, Any], Any] | None = None, opts=None) -> list[Any]:
        """Run a set's members (`run_in_turn`: one at a time, each after the one before)
        until each one's `health` holds; `after_start` steps run once it does.
        `first_after`: what the first member waits for; `each_after`: what every
        member does; `then(member, ran)`: a resource made after each member that the
        next one waits for instead (a login check), or None. `opts`: the parent.
        Returns what ran, a resource per member."""

    def run_job(self, name: str, *, job: SparkJob, config, settings,
                uses_clients: Sequence[str] = (), opts=None) -> Any:
        """Run the validation job (`job`: its main file and package zip, shipped on
        `--py-files`, its spark-submit line and how its output reads) once; the
        returned resource's `report` is its summary."""

    def run(self, service: Service, opts=None) -> Ran:
        """Run one service of a kind the platform runs (model/capabilities.py
        says which): an ImageService on a platform that runs containers, a
        ProcessService or WrittenFiles on one that does not, a
        PythonModuleService everywhere. Another kind raises UnsupportedService."""

    def switch_runner(self, aliases: Sequence[str]) -> dict | None:
        """Where the failover switch between `aliases` runs: None in the
        program's own process (it reaches the clusters), else a runner that
        mirrorstack.failover.switch hands the switch to (kubernetes: a Job)."""
