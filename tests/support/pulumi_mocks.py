"""Run a topology's Pulumi program under mocks and record every registration:
the resource graph and each resource's inputs, exactly what the providers
would receive. Used by the unit tests (outputs are the inputs) and by the
docker engine harness (tests/support/docker_provider.py: outputs are what the
real engine made). The secured clusters' generated keys and passwords come
back as recognisable fakes, so tests can find where one went."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import pulumi
import yaml

from mirrorstack.model.spec import load_topology
from mirrorstack.args import ReplicationTopologyArgs
from mirrorstack.platforms.local.platform import LocalPlatform
from mirrorstack.stack_history import connect_group_ids
from mirrorstack.topology import ReplicationTopology

ROOT = Path(__file__).resolve().parents[2]
DYNAMIC = "pulumi-python:dynamic"  # every dynamic resource's type starts so (…/local:LocalService, …)
SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's marker of a secret value on the wire
AGGREGATION = "aggregation"  # the stack a deploy builds unless told otherwise

# What the mocked dynamic resources "generate": recognisable, so tests can find
# where a key or password went (ClusterCertificates, GeneratedPassword).
FAKE_KEY_MARK = "PRIVATE KEY"
FAKE_PASSWORD_MARK = "FAKEPW"


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


def ints(value):
    """Mocks hand numbers back as floats; the manifests hold ints. Secrets are unwrapped."""
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return ints(value["value"])
        return {k: ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [ints(v) for v in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


def fake_pem(kind: str, body: str) -> str:
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----\n"


def fake_generated(inputs: dict) -> dict:
    """Outputs of the secured clusters' dynamic resources (else the inputs)."""
    if {"cluster", "nodes"} <= inputs.keys():  # ClusterCertificates (None inputs are not sent)
        cluster = inputs["cluster"]
        ca = fake_pem("CERTIFICATE", f"FAKE-CA-{cluster}")
        keystore = lambda role: (fake_pem(FAKE_KEY_MARK, f"FAKE-{role}-KEY-{cluster}")  # noqa: E731
                                 + fake_pem("CERTIFICATE", f"FAKE-{role}-CERT-{cluster}") + ca)
        leaves = {node: keystore(node.upper()) for node in [*inputs["nodes"], "client"]}
        return {**inputs, "ca_cert": ca, "truststore": ca, "ca_key": fake_pem(FAKE_KEY_MARK, f"FAKE-CA-KEY-{cluster}"),
                "leaves": leaves, "certificates": {  # as cert_lifecycle.summary shapes it
                    "ca": {"fingerprint_sha256": "AA:" * 31 + "AA", "not_after": "2036-01-01T00:00:00Z", "generation": 1},
                    "certificates": {n: {"not_after": "2027-01-01T00:00:00Z", "serial": "1"} for n in leaves},
                    "trusted_cas": ["AA:" * 31 + "AA"], "rotation_phase": "none"}}
    if inputs.keys() - {"__provider"} == {"length"}:  # GeneratedPassword
        return {**inputs, "result": f"{FAKE_PASSWORD_MARK}-{inputs['length']}-s3cr3t"}
    return inputs


class RecordingMocks(pulumi.runtime.Mocks):
    """Records every registration; a resource's id and outputs are `results(...)`
    (here its inputs; the dynamic resources of secured clusters return fake PEMs
    and passwords). The SDK registers from worker threads, several at once."""

    def __init__(self):
        self.resources: list[Registration] = []
        self.prefix = None  # "<topology>-", from the (first) ReplicationTopology registered
        self.delete_before_replace: dict[tuple[str, str], bool] = {}  # (type, registered name) → option
        self.retain_on_delete: dict[tuple[str, str], bool] = {}  # (type, registered name) → option
        self.dependencies: dict[tuple[str, str], set[tuple[str, str]]] = {}  # (type, registered name) → its dependencies
        self._lock = threading.Lock()

    def results(self, args, registration: Registration) -> tuple[str, dict]:
        """(id, outputs) of a registered resource."""
        return args.name + "_id", fake_generated(args.inputs) if is_type(args.typ, DYNAMIC) else args.inputs

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


def aggregation_topology():
    return stack_topology(AGGREGATION)


def deploy(make_platform, topology=None, stack: str = AGGREGATION, mocks: RecordingMocks | None = None):
    """Build `topology` (default: the aggregation stack's) on a fresh mock engine;
    wait until every registration is done and every output (and manifest) is
    resolved. Returns (mocks, built): built holds the platform, the clusters'
    and Connect's outputs, the manifests."""
    topology = topology or aggregation_topology()
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
                                 manifests, topology_resource.validation_output).apply(
            lambda out: built.update(clusters=out[0], connect=out[1], manifests=out[2], validation=out[3]))

    program()
    return mocks, built



def build_local(tmp_path, data: dict, *, stack: str = "edge", mocks=None, history: bool = False, **kwargs):
    """The topology's resources on a fresh mock engine (local platform); with
    `history`, group ids come from mirrorstack.stack_history as in __main__."""
    mocks = mocks or RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="mirrorstack", stack=stack, preview=False)
    topology = load_topology(data)
    out = {}

    @pulumi.runtime.test
    def program():
        groups = connect_group_ids(stack, [n for n, c in topology.connect.items() if not c.is_external]) \
            if history else None
        t = ReplicationTopology(stack, ReplicationTopologyArgs(
            topology=topology, platform=LocalPlatform(stack, str(tmp_path)), stack=stack,
            connect_groups=groups, **kwargs))
        return pulumi.Output.all(t.connect_outputs, t.connect_groups).apply(
            lambda a: out.update(connect=a[0], groups=a[1]))
    program()
    return mocks, out


def secret_text_in(value) -> list[str]:
    """The strings in `value` holding a (fake) PEM key or generated password."""
    if isinstance(value, dict):
        return [t for v in value.values() for t in secret_text_in(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in secret_text_in(v)]
    return [value] if isinstance(value, str) and (FAKE_KEY_MARK in value or FAKE_PASSWORD_MARK in value) else []


def holds_secret_text(value) -> bool:
    return bool(secret_text_in(value))


def plain_parts(value, path: str = ""):
    """(path, value) of every part of a mocked resource's inputs that is not a
    Pulumi secret (secret values arrive wrapped in SECRET_SIG)."""
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return
        for k, v in value.items():
            yield from plain_parts(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from plain_parts(v, f"{path}[{i}]")
    else:
        yield path, value


def leaks(mocks: RecordingMocks) -> list[tuple[str, str]]:
    """(resource name, input path) of every non-secret input holding a key or password."""
    return [(r.name, path) for r in mocks.resources for path, v in plain_parts(r.inputs) if holds_secret_text(v)]
