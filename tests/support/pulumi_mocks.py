"""Run a topology's Pulumi program under mocks and record every registration:
the resource graph and each resource's inputs, exactly what the providers
would receive. Used by the unit tests (outputs are the inputs) and by the
docker engine harness (tests/support/docker_provider.py: outputs are what the
real engine made)."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import pulumi
import yaml

from mirrorstack.model.spec import load_topology
from mirrorstack.args import ReplicationTopologyArgs
from mirrorstack.topology import ReplicationTopology

ROOT = Path(__file__).resolve().parents[2]
DYNAMIC = "pulumi-python:dynamic"  # every dynamic resource's type starts so (…/local:LocalService, …)
SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's marker of a secret value on the wire


@dataclass
class Registration:
    """One registered resource. `name` is its name inside the topology (the
    registered name without the `<stack>-` prefix every resource below a
    ReplicationTopology carries, see mirrorstack.naming); `registered_name` the real one."""
    typ: str
    name: str
    registered_name: str
    inputs: dict
    provider: str | None
    custom: bool


def is_type(typ: str, wanted: str) -> bool:
    """`wanted` is a type token, or DYNAMIC for any dynamic resource."""
    return typ == wanted or (wanted == DYNAMIC and typ.startswith(DYNAMIC))


def unwrap_secrets(value):
    """`value` with every Pulumi secret replaced by its plain value (what a provider gets)."""
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return unwrap_secrets(value.get("value"))
        return {k: unwrap_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap_secrets(v) for v in value]
    return value


class RecordingMocks(pulumi.runtime.Mocks):
    """Records every registration; a resource's id and outputs are `results(...)`
    (here its inputs). The SDK registers from worker threads, several at once."""

    def __init__(self):
        self.resources: list[Registration] = []
        self.prefix = None  # "<topology>-", from the (first) ReplicationTopology registered
        self.delete_before_replace: dict[tuple[str, str], bool] = {}  # (type, registered name) → option
        self.retain_on_delete: dict[tuple[str, str], bool] = {}  # (type, registered name) → option
        self.dependencies: dict[tuple[str, str], set[tuple[str, str]]] = {}  # (type, registered name) → its dependencies
        self._lock = threading.Lock()

    def results(self, args, registration: Registration) -> tuple[str, dict]:
        """(id, outputs) of a registered resource."""
        return args.name + "_id", args.inputs

    def new_resource(self, args):
        with self._lock:
            if args.typ == "mirrorstack:topology:ReplicationTopology" and self.prefix is None:
                self.prefix = f"{args.name}-"
            name = args.name.removeprefix(self.prefix) if self.prefix else args.name
            registration = Registration(args.typ, name, args.name, args.inputs, args.provider, args.custom)
            self.resources.append(registration)
        return list(self.results(args, registration))

    def call(self, args):
        return {}, None

    def of_type(self, typ: str) -> dict[str, dict]:
        found = {r.name: r.inputs for r in self.resources if is_type(r.typ, typ)}
        assert len(found) == sum(is_type(r.typ, typ) for r in self.resources), f"duplicate names among {typ}"
        return found


class RecordingMonitor(pulumi.runtime.mocks.MockMonitor):
    """The mock engine, also recording the options the real engine would get
    with each registration (delete-before-replace, retain-on-delete), which Mocks do not see."""

    def RegisterResource(self, request):  # noqa: N802 (the gRPC method's name)
        self.mocks.delete_before_replace[(request.type, request.name)] = request.deleteBeforeReplace
        self.mocks.retain_on_delete[(request.type, request.name)] = request.retainOnDelete
        self.mocks.dependencies[(request.type, request.name)] = {  # urn:pulumi:<stack>::<project>::<parents$type>::<name>
            (urn.split("::")[2].rsplit("$", 1)[-1], urn.rsplit("::", 1)[1]) for urn in request.dependencies}
        return super().RegisterResource(request)


def stack_topology(stack: str, **changes):
    """The topology of stacks/Pulumi.<stack>.yaml, with top-level `changes` (e.g. platform="docker")."""
    document = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    return load_topology({**document["config"]["mirrorstack:topology"], **changes})


def deploy(make_platform, topology, stack: str, mocks: RecordingMocks | None = None):
    """Build `topology` on a fresh mock engine; wait until every registration
    is done and every output (and manifest) is resolved. Returns (mocks, built):
    built holds the platform, the clusters' and Connect's outputs, the manifests."""
    mocks = mocks or RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="mirrorstack", stack=stack, preview=False, monitor=RecordingMonitor(mocks))
    built = {}

    @pulumi.runtime.test
    def program():
        platform = make_platform()
        topology_resource = ReplicationTopology(stack, ReplicationTopologyArgs(topology=topology, platform=platform,
                                                                               stack=stack))
        built["platform"] = platform
        built["topology"] = topology_resource
        manifests = pulumi.Output.from_input(getattr(platform, "manifests", []))
        return pulumi.Output.all(topology_resource.cluster_outputs, topology_resource.connect_outputs,
                                 manifests).apply(
            lambda out: built.update(clusters=out[0], connect=out[1], manifests=out[2]))

    program()
    return mocks, built
