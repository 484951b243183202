"""The topology model: the stack's `mirrorstack:topology` config, validated.

Every rule is checked here, before anything is deployed, and every problem is
reported at once with its field path (`flows[1].target`) and the fix. Pure
pydantic, no pulumi import: tests and the JSON Schema need no engine.
"""
from __future__ import annotations

import difflib
import json
import re
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

SCHEMA_FILE = Path(__file__).parent / "schema" / "topology.schema.json"
# Aliases prefix remote topics (`us.orders`) and MM2 splits those on the separator.
ALIAS = re.compile(r"[A-Za-z0-9_-]+")
MAX_ALIAS = 100  # leaves room in the 249-character topic name limit
MAX_CYCLES = 10  # reported per topology; a dense identity mesh has thousands


class TopologyError(ValueError):
    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(["Invalid mirrorstack topology:", *(f"  - {p}" for p in problems)]))


def _string_value(value: Any) -> Any:
    # YAML turns `3`, `true` and an empty value into int/bool/None; Kafka wants text.
    if value is None or isinstance(value, (bool, int, float)):
        example = json.dumps("" if value is None else json.dumps(value))
        raise PydanticCustomError("quote_value", "must be a string: quote it in YAML, e.g. {example}",
                                  {"example": example})
    return value


Properties = dict[str, Annotated[str, BeforeValidator(_string_value)]]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClientSecurity(_Model):
    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="security.protocol clients use to reach the cluster.")
    properties: Properties = Field({}, description="Extra client properties (ssl.*, sasl.*), non-secret only.")


class ExternalCluster(_Model):
    bootstrap_servers: str = Field(description="Comma-separated host:port list of the existing cluster.")
    security: ClientSecurity = Field(ClientSecurity(), description="How clients connect to it.")

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_ports(cls, value: str) -> str:
        for entry in value.split(","):
            host, _, port = entry.strip().rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{entry.strip()!r} is not host:port; fix: write e.g. 'broker1:9092,broker2:9092'")
        return value


class Cluster(_Model):
    brokers: int = Field(1, ge=1, le=9, description=(
        "Brokers to deploy (default 1); for an external cluster, how many it has (default 3), "
        "which caps replication factors."))
    settings: Properties = Field({}, description="Raw broker properties for deployed clusters; values are strings.")
    external: ExternalCluster | None = Field(
        None, description="Set to use an existing cluster instead of deploying one.")

    @model_validator(mode="before")
    @classmethod
    def _default_brokers(cls, data: Any) -> Any:
        # An existing cluster is assumed production-sized, a deployed one minimal.
        if isinstance(data, Mapping) and "brokers" not in data and data.get("external") is not None:
            return {**data, "brokers": 3}
        return data

    @property
    def is_external(self) -> bool:
        return self.external is not None


class ConnectCluster(_Model):
    kafka: str = Field(description="Alias of the cluster holding its config, offset and status topics.")
    workers: int = Field(1, ge=1, le=9, description="Connect workers in the group.")
    settings: Properties = Field({}, description="Raw Connect worker properties; values are strings.")


class ConnectorOverrides(_Model):
    source: Properties = Field({}, description="Raw MirrorSourceConnector config keys.")
    checkpoint: Properties = Field({}, description="Raw MirrorCheckpointConnector config keys.")
    heartbeat: Properties = Field({}, description="Raw MirrorHeartbeatConnector config keys.")


class Flow(_Model):
    source: str = Field(description="Alias of the cluster replicated from.")
    target: str = Field(description="Alias of the cluster replicated to.")
    connect: str | None = Field(
        None, description="Connect cluster running the connectors; default: the one named after the target.")
    topics: list[str] = Field([".*"], description="Regexes of topics to replicate.")
    topics_exclude: list[str] = Field([], description="Regexes of topics not to replicate.")
    groups: list[str] = Field([".*"], description="Regexes of consumer groups whose offsets are checkpointed.")
    groups_exclude: list[str] = Field([], description="Regexes of consumer groups to skip.")
    replication_policy: Literal["default", "identity"] = Field("default", description=(
        "default: remote topics are named <source><separator><topic>; identity: same name (no cycles allowed)."))
    separator: str = Field(".", min_length=1, description="Separator between source alias and topic name.")
    sync_topic_configs: bool = Field(True, description="Copy topic configs to the remote topics.")
    sync_topic_acls: bool = Field(False, description="Copy topic ACLs to the target.")
    heartbeats: bool = Field(True, description="Run the heartbeat connector.")
    checkpoints: bool = Field(True, description="Run the checkpoint connector (consumer offset translation).")
    sync_group_offsets: bool = Field(
        False, description="Write translated offsets into the target's groups; needs checkpoints.")
    tasks_max: int = Field(8, ge=1, le=256, description=(
        "Cap on source tasks; MM2 creates min(tasks_max, partitions), so the default sizes to partitions."))
    replication_factor: int | None = Field(None, ge=1, description=(
        "For remote topics and MM2's internal topics; default min(3, target brokers)."))
    overrides: ConnectorOverrides = Field(ConnectorOverrides(), description="Raw connector configs, applied last.")
    restart_trigger: str = Field("", description=(
        "Change this value (e.g. a date) to restart the flow's connectors and tasks on the next up "
        "(mm2.sh's redeploy)."))

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"


class Topology(_Model):
    """A MirrorMaker 2 replication topology: the `mirrorstack:topology` stack config value."""

    platform: Literal["local", "docker", "kubernetes"] = Field("local", description="Where the clusters run.")
    clusters: dict[str, Cluster] = Field(min_length=1, description="Kafka clusters by alias.")
    connect: dict[str, ConnectCluster] = Field({}, description=(
        "Connect clusters by name; default: one per flow target, named after it, topics on the target."))
    flows: list[Flow] = Field(min_length=1, description="Replication flows, one per source -> target pair.")

    @model_validator(mode="after")
    def _check_and_resolve(self) -> Topology:
        # Flows without `connect` run on a Connect cluster named after their target.
        defaults = {f.target for f in self.flows if f.connect in (None, f.target) and f.target in self.clusters}
        defaults -= self.connect.keys()
        problems = list(_rule_problems(self, known_connect=self.connect.keys() | defaults))
        if problems:
            raise TopologyError(problems)
        for name in sorted(defaults):
            self.connect[name] = ConnectCluster(kafka=name)
        for flow in self.flows:
            flow.connect = flow.connect or flow.target
        return self

    def target_brokers(self, flow: Flow) -> int:
        return self.clusters[flow.target].brokers

    def replication_factor(self, flow: Flow) -> int:
        if flow.replication_factor is not None:
            return flow.replication_factor
        return min(3, self.target_brokers(flow))

    def flows_by_connect(self) -> dict[str, list[Flow]]:
        return {name: [f for f in self.flows if f.connect == name] for name in self.connect}

    def identity_merges(self) -> dict[str, list[str]]:
        """Targets fed by several identity flows: same-named topics merge there."""
        by_target: dict[str, list[str]] = {}
        for flow in self.flows:
            if flow.replication_policy == "identity":
                by_target.setdefault(flow.target, []).append(flow.name)
        return {target: names for target, names in by_target.items() if len(names) > 1}

    def remote_topic(self, flow: Flow, topic: str) -> str:
        return topic if flow.replication_policy == "identity" else f"{flow.source}{flow.separator}{topic}"


def _path(loc: tuple) -> str:
    """('flows', 1, 'target') -> flows[1].target; keys with dots are quoted."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif ALIAS.fullmatch(str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{json.dumps(str(part))}]"
    return out or "mirrorstack:topology"


def _rule_problems(t: Topology, known_connect: set[str]) -> Iterator[str]:
    clusters = ", ".join(sorted(t.clusters))
    for alias, cluster in t.clusters.items():
        if not ALIAS.fullmatch(alias) or len(alias) > MAX_ALIAS:
            yield (f"{_path(('clusters', alias))}: alias {alias!r} cannot appear in a topic name; fix: use at most "
                   "100 letters, digits, '_' or '-' (no dots: MM2 splits remote topic names on them)")
        if cluster.is_external and cluster.settings:
            where = _path(("clusters", alias, "settings"))
            yield f"{where}: broker settings only apply to deployed clusters; fix: remove them"
    for name, cc in t.connect.items():
        if cc.kafka not in t.clusters:
            yield f"{_path(('connect', name, 'kafka'))}: unknown cluster {cc.kafka!r}; fix: use one of {clusters}"
        if not any((f.connect or f.target) == name for f in t.flows):
            yield (f"{_path(('connect', name))}: no flow uses this Connect cluster; "
                   f"fix: remove it or set `connect: {name}` on a flow")
    seen: dict[tuple[str, str], int] = {}
    for i, f in enumerate(t.flows):
        yield from _flow_problems(t, i, f, clusters, known_connect)
        if (f.source, f.target) in seen:
            yield (f"flows[{i}]: duplicate of flows[{seen[f.source, f.target]}] (both {f.name}); "
                   "fix: merge them into one flow (list all topics there) or remove one")
        seen.setdefault((f.source, f.target), i)
    for cycle, indexes in _identity_cycles(t.flows):
        identity = [i for i in indexes if t.flows[i].replication_policy == "identity"]
        paths = ", ".join(f"flows[{i}].replication_policy" for i in identity)
        names = ", ".join(f"flows[{i}] ({t.flows[i].name}, {t.flows[i].replication_policy})" for i in indexes)
        yield (f"{paths}: identity policy on the cycle {cycle} via {names}; identity keeps topic names, so "
               "records would loop forever; fix: use `replication_policy: default` on every flow of this cycle, "
               "or break the cycle")


def _flow_problems(t: Topology, i: int, f: Flow, clusters: str, known_connect: set[str]) -> Iterator[str]:
    for side in ("source", "target"):
        alias = getattr(f, side)
        if alias not in t.clusters:
            yield (f"flows[{i}].{side}: unknown cluster {alias!r}; "
                   f"fix: use one of {clusters} or add it under clusters")
        elif f.separator in alias and ALIAS.fullmatch(alias):  # else reported under clusters already
            yield (f"flows[{i}].{side}: alias {alias!r} contains this flow's separator {f.separator!r}; fix: choose "
                   "another separator or rename the cluster")
    if f.source == f.target:
        yield f"flows[{i}].target: same as the source {f.source!r}; fix: replicate to a different cluster"
    if f.connect is not None and f.connect not in known_connect:
        yield (f"flows[{i}].connect: unknown Connect cluster {f.connect!r}; fix: use one of "
               f"{', '.join(sorted(known_connect))}, define it under connect, or drop it to use the target's")
    for field in ("topics", "topics_exclude", "groups", "groups_exclude"):
        for j, regex in enumerate(getattr(f, field)):
            try:
                re.compile(regex)
            except re.error as e:
                yield f"flows[{i}].{field}[{j}]: regex {regex!r} does not compile ({e}); fix: correct the regex"
            if "," in regex:  # MM2 takes these as one comma-separated list
                yield f"flows[{i}].{field}[{j}]: regex {regex!r} contains ','; fix: split it into separate entries"
    if f.checkpoints is False and f.sync_group_offsets:
        yield (f"flows[{i}].sync_group_offsets: offset sync is done by the checkpoint connector; "
               "fix: set checkpoints: true, or sync_group_offsets: false")
    if f.target not in t.clusters:
        return
    brokers = t.target_brokers(f)
    if f.replication_factor is not None and f.replication_factor > brokers:
        yield (f"flows[{i}].replication_factor: {f.replication_factor} is more than the {brokers} broker(s) of "
               f"{f.target!r}; fix: set it to at most {brokers}, or raise clusters.{f.target}.brokers")
    for connector in ("source", "checkpoint", "heartbeat"):
        for key, value in getattr(f.overrides, connector).items():
            if key.endswith("replication.factor"):
                where = _path(("flows", i, "overrides", connector, key))
                if not value.lstrip("-").isdigit():
                    yield f"{where}: {value!r} is not an integer; fix: write e.g. \"{min(3, brokers)}\""
                elif int(value) > brokers:
                    yield (f"{where}: {value} is more than the {brokers} broker(s) of {f.target!r}; fix: set it "
                           f"to at most {brokers}, or raise clusters.{f.target}.brokers")


def _identity_cycles(flows: list[Flow]) -> list[tuple[str, list[int]]]:
    """Every simple cycle through an identity flow, as ('a -> b -> a', flow indexes)."""
    edges: dict[tuple[str, str], list[int]] = {}
    for i, f in enumerate(flows):
        if f.source != f.target:
            edges.setdefault((f.source, f.target), []).append(i)
    succ: dict[str, list[str]] = {}
    for s, t in sorted(edges):
        succ.setdefault(s, []).append(t)

    def closing_paths(path: list[str]) -> Iterator[list[str]]:
        for nxt in succ.get(path[-1], []):
            if nxt == path[0]:
                yield path
            elif nxt not in path:
                yield from closing_paths([*path, nxt])

    cycles: set[tuple[str, ...]] = set()
    starts = [pair for pair, ix in sorted(edges.items())
              if any(flows[i].replication_policy == "identity" for i in ix)]
    for path in (p for pair in starts for p in closing_paths(list(pair))):
        k = path.index(min(path))  # one rotation per cycle: smallest alias first
        cycles.add(tuple(path[k:] + path[:k]))
        if len(cycles) >= MAX_CYCLES:
            break
    out = []
    for c in sorted(cycles):
        ring = [*c, c[0]]
        out.append((" -> ".join(ring), [i for pair in zip(ring, ring[1:]) for i in edges[pair]]))
    return out


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The model whose keys sit at `loc`, to list them when a key is unknown."""
    node: Any = Topology
    for part in loc:
        if isinstance(node, type) and issubclass(node, BaseModel):
            node = node.model_fields[part].annotation if part in node.model_fields else None
        else:  # a dict key or list index: step into the value type
            node = typing.get_args(node)[-1] if typing.get_origin(node) in (dict, list) else None
        if isinstance(node, types.UnionType):  # `ExternalCluster | None`
            node = typing.get_args(node)[0]
    return node if isinstance(node, type) and issubclass(node, BaseModel) else None


def _pydantic_problem(err: dict) -> str:
    where, kind, msg = _path(err["loc"]), err["type"], err["msg"].removeprefix("Value error, ")
    if kind == "extra_forbidden":
        allowed = sorted((_model_at(err["loc"][:-1]) or _Model).model_fields)
        close = difflib.get_close_matches(str(err["loc"][-1]), allowed, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"{where}: unknown key; fix: {hint}allowed keys here are {', '.join(allowed) or 'none'}"
    if kind == "missing":
        return f"{where}: required; fix: add it"
    if kind not in ("quote_value", "value_error") and not isinstance(err.get("input"), (dict, list)):
        msg += f" (got {err.get('input')!r})"
    return f"{where}: {msg}"


def load_topology(data: Mapping) -> Topology:
    """Validate the stack's topology config; raise TopologyError listing every problem."""
    try:
        return Topology.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            rules = err.get("ctx", {}).get("error")
            problems += rules.problems if isinstance(rules, TopologyError) else [_pydantic_problem(err)]
        raise TopologyError(problems) from None


def topology_json_schema() -> dict:
    schema = Topology.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "mirrorstack topology (the mirrorstack:topology stack config value)"
    return schema


def render_json_schema() -> str:
    return json.dumps(topology_json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # `python -m components.model` regenerates the committed schema
    SCHEMA_FILE.parent.mkdir(exist_ok=True)
    SCHEMA_FILE.write_text(render_json_schema())
