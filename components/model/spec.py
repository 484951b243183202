"""The topology model: the stack's `mirrorstack:topology` config, validated.

Every rule is checked here, before anything is deployed, and every problem is
reported at once with its field path (`flows[1].target`) and the fix. Pure
pydantic, no pulumi import: tests and the JSON Schema need no engine.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo,
                      WithJsonSchema, field_validator, model_validator)
from pydantic_core import PydanticCustomError

from mirrorstack.mm2.connectors import DEFAULT_MAX_RECORD_BYTES
from mirrorstack.mm2.flow_settings import FlowThroughput, NamesByKind, OverridesByKind
from mirrorstack.mm2.flows import FlowDescription, FlowSelection
from mirrorstack.model.capabilities import BUILT_IN, unknown as unknown_platform
from mirrorstack.model.deprecations import Deprecation, renamed_key
from mirrorstack.model.expansion import SHORTHAND, FlowOrigin, expand_flows
from mirrorstack.model.messages import TopologyError, validation_problems
from mirrorstack.model.rules import rule_problems
from mirrorstack.model.spark_masters import master_kind, spark_master_problem
from mirrorstack.model.strict import StrictModel as _Model
from mirrorstack.model.users import USER_NAME
from mirrorstack.model.kubernetes import KubernetesSettings
from mirrorstack.versions import official_image

SCHEMA_FILE = Path(__file__).parents[1] / "schema" / "topology.schema.json"

# One validation's findings travel in pydantic's validation context (load_topology
# passes it): "deprecated", the old keys met (components/model/deprecations.py
# rows), for Topology.warnings; "origins", each expanded flow's place in the stack
# file, for the rules' and pydantic's messages. Validated without a context (a
# model built in code), old keys still work, silently, and origins are the indexes.


def _met_deprecated(info: ValidationInfo, key: Deprecation) -> None:
    if info.context is not None:
        info.context.setdefault("deprecated", []).append(key)


def _string_value(value: Any) -> Any:
    # YAML turns `3`, `true` and an empty value into int/bool/None; Kafka wants text.
    if value is None or isinstance(value, (bool, int, float)):
        example = json.dumps("" if value is None else json.dumps(value))
        raise PydanticCustomError("quote_value", "must be a string; fix: quote it in YAML, e.g. {example}",
                                  {"example": example})
    return value


Properties = dict[str, Annotated[str, BeforeValidator(_string_value)]]


SASL_MECHANISMS = Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]


class ClientSecurity(_Model):
    """How clients reach an existing cluster. Secrets (the SASL password, a PEM
    key) come from `mirrorstack:clusterSecrets.<alias>`, never from here."""

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="security.protocol clients use to reach the cluster.")
    mechanism: SASL_MECHANISMS | None = Field(None, description=(
        "SASL mechanism (SASL_* protocols; default SCRAM-SHA-512). The password is the secret "
        "`mirrorstack:clusterSecrets.<alias>.password`."))
    username: str | None = Field(None, min_length=1, description="SASL user (SASL_* protocols).")
    mtls: bool = Field(False, description=(
        "Clients present a certificate (SSL/SASL_SSL): ssl.keystore.location in properties, or the PEM "
        "key as the secret `clusterSecrets.<alias>[\"ssl.keystore.key\"]`."))
    properties: Properties = Field({}, description="Extra client properties (ssl.*, sasl.*), non-secret only.")


class Certificates(_Model):
    """Lifetime of a secured cluster's generated certificates. The defaults are
    Strimzi's (365 days validity, renewed in the last 30; a 10-year CA)."""

    validity_days: int = Field(365, ge=2, le=825, description=(
        "Days a node or client certificate is valid (default 365, Strimzi's default; at most 825, the longest "
        "validity common TLS clients accept)."))
    renew_before_days: int = Field(30, ge=1, description=(
        "The renewal window: the `pulumi up` that runs within this many days of a certificate's expiry "
        "re-issues it with the same CA (default 30, Strimzi's renewal window)."))
    ca_validity_days: int = Field(3650, ge=30, le=36500, description=(
        "Days the cluster's CA is valid (default 3650: Strimzi's CAs last 365 days but renew themselves; "
        "here a CA is replaced only by rotation, see ca_generation)."))
    ca_generation: int = Field(1, ge=1, description=(
        "Raise it by one to rotate the CA: the next three `pulumi up`s trust old and new CA, re-issue every "
        "certificate with the new one, then drop the old one. Never lower it (the deployed stack refuses)."))

    @model_validator(mode="after")
    def _window_inside_validity(self) -> "Certificates":
        if self.renew_before_days >= self.validity_days:
            raise ValueError(f"renew_before_days ({self.renew_before_days}) must be less than validity_days "
                             f"({self.validity_days}), or every `up` would renew; fix: e.g. renew_before_days: "
                             f"{max(1, self.validity_days // 12)}")
        if self.ca_validity_days <= self.validity_days:
            raise ValueError(f"ca_validity_days ({self.ca_validity_days}) must exceed validity_days "
                             f"({self.validity_days}): no certificate outlives its CA; fix: raise ca_validity_days")
        return self


class Security(_Model):
    """How a deployed cluster is secured. For anything but PLAINTEXT the stack
    generates a CA and certificates; brokers and the controller talk SSL with
    client certificates among themselves; a SASL user is created at start with
    a generated password (kept in state as a secret)."""

    protocol: Literal["PLAINTEXT", "SSL", "SASL_SSL"] = Field(
        "PLAINTEXT", description="What clients (Connect, MM2, the validation job) use.")
    mechanism: SASL_MECHANISMS | None = Field(
        None, description="SASL mechanism (SASL_SSL only; default SCRAM-SHA-512; SCRAM-SHA-256 and PLAIN too).")
    mtls: bool = Field(False, description=(
        "Clients must also present a certificate signed by the cluster's CA (SSL or SASL_SSL)."))
    user: str = Field("mirrorstack", pattern=USER_NAME, description=(
        "The SASL user created at start: mirrorstack's own (Connect, MirrorMaker 2, the validation job). With "
        "authorization it holds only the rights its flows need (docs/guides/authorization.md)."))
    authorization: bool | None = Field(None, description=(
        "Run KRaft's StandardAuthorizer, deny by default: every principal may do only what an ACL grants "
        "(brokers and controllers are super users). Default: on wherever clients prove who they are "
        "(SASL_SSL, or SSL with mtls), on every platform; false turns it off."))
    certificates: Certificates = Field(Certificates(), description=(
        "Validity and renewal of the generated certificates, and CA rotation (SSL and SASL_SSL)."))

    @property
    def secured(self) -> bool:
        return self.protocol != "PLAINTEXT"

    @property
    def sasl_mechanism(self) -> str | None:
        return (self.mechanism or "SCRAM-SHA-512") if self.protocol == "SASL_SSL" else None

    @property
    def identifies_clients(self) -> bool:
        """Whether a client has a name an ACL can grant to (SASL, or a client certificate)."""
        return self.protocol == "SASL_SSL" or (self.protocol == "SSL" and self.mtls)


ACL_OPERATIONS = Literal["read", "write", "create", "delete", "alter", "describe", "describe_configs",
                         "alter_configs", "all"]


class AclGrant(_Model):
    """One right of an application principal: operations on a topic, a consumer
    group or a transactional id, named literally or by prefix (Kafka's ACLs)."""

    topic: str | None = Field(None, min_length=1, description="A topic name (or prefix).")
    group: str | None = Field(None, min_length=1, description="A consumer group id (or prefix).")
    transactional_id: str | None = Field(None, min_length=1, description="A transactional id (or prefix).")
    pattern: Literal["literal", "prefixed"] = Field("literal", description=(
        "literal: exactly that name (`*` for every one); prefixed: every name that starts with it."))
    operations: list[ACL_OPERATIONS] = Field(min_length=1, description=(
        "What the principal may do, e.g. [write, describe] to produce, [read, describe] to consume."))

    @model_validator(mode="after")
    def _one_resource(self) -> "AclGrant":
        named = [k for k in ("topic", "group", "transactional_id") if getattr(self, k) is not None]
        if len(named) != 1:
            raise ValueError(f"names {len(named)} resources ({', '.join(named) or 'none'}); fix: give exactly one "
                             "of topic, group or transactional_id per grant (list several grants)")
        return self

    @property
    def resource(self) -> tuple[str, str]:
        """(resource type, name): ("topic", "orders")."""
        return next((k, getattr(self, k)) for k in ("topic", "group", "transactional_id") if getattr(self, k))


class Principal(_Model):
    """An application user of a deployed, authorizing SASL cluster: mirrorstack
    creates it with a generated password (stack output `principal_credentials`,
    a secret) and grants it exactly `allow`."""

    cluster: str = Field(min_length=1, description="The cluster the user exists on.")
    allow: list[AclGrant] = Field(description="Its rights; nothing else is allowed ([]: none yet).")


class StackOutput(_Model):
    stack: str = Field(min_length=1, description="The other stack, e.g. organization/mirrorstack/aggregation.")
    cluster: str = Field(min_length=1, description="The alias in that stack's `clusters` output.")


class ExternalCluster(_Model):
    bootstrap_servers: str | None = Field(None, description="Comma-separated host:port list of the existing cluster.")
    from_stack: StackOutput | None = Field(None, description=(
        "Instead of bootstrap_servers: a cluster another mirrorstack stack runs, read from its `clusters` "
        "output (a StackReference) when this stack deploys."))
    security: ClientSecurity = Field(ClientSecurity(), description="How clients connect to it.")
    kafka_version: str | None = Field(None, pattern=r"^[0-9]+\.[0-9]+(\.[0-9]+)?$", examples=["3.4"], description=(
        "The cluster's Kafka version when older than mirrorstack's (e.g. '3.4'); features it cannot "
        "honour (exactly-once) are refused."))

    @model_validator(mode="after")
    def _one_address(self) -> ExternalCluster:
        if (self.bootstrap_servers is None) == (self.from_stack is None):
            raise ValueError("give exactly one of bootstrap_servers and from_stack; fix: e.g. "
                             "bootstrap_servers: 'broker1:9092' or from_stack: {stack: org/project/stack, cluster: us}")
        return self

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_ports(cls, value: str | None) -> str | None:
        if value is None:
            return value
        for entry in value.split(","):
            host, _, port = entry.strip().rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{entry.strip()!r} is not host:port; fix: write e.g. 'broker1:9092,broker2:9092'")
        return value


JAVA_SIZE = r"^[1-9][0-9]*[mg]$"
JVM_OPTION_PREFIXES = ("-XX:", "-Xms", "-Xss", "-Xlog:", "-D")
SECRET_WORDS = re.compile(r"password|secret|token|credential", re.I)


def plain_jvm_options(options: list[str], *, heap_field: str) -> list[str]:
    """`options` if each is one mirrorstack passes on to a JVM (never a secret: command lines are visible)."""
    for option in options:
        if not option.startswith(JVM_OPTION_PREFIXES) or any(c.isspace() for c in option):
            raise ValueError(f"{option!r} is not an option mirrorstack passes on; fix: use -XX:, -Xms, -Xss, "
                             f"-Xlog: or -D options, one per item, without spaces (the heap is `{heap_field}`; the "
                             "classpath and agents are mirrorstack's)")
        if option.startswith("-D") and SECRET_WORDS.search(option.split("=", 1)[0]):
            raise ValueError(f"{option.split('=', 1)[0]!r} looks like a secret, and command lines are visible "
                             "(ps, kubectl describe); fix: pass secrets through `security`, never as -D")
    return options


def java_size_mib(size: str) -> int:
    """`-Xmx` sizes (512m, 1g) in MiB."""
    return int(size[:-1]) * (1024 if size[-1] == "g" else 1)


class Resources(_Model):
    """What each JVM of a deployed cluster (broker) or Connect group (worker) may use."""

    heap: str = Field("1g", pattern=JAVA_SIZE, examples=["2g"], description=(
        "-Xmx of each JVM. Default 1g (Kafka's own launcher default for brokers): 512m left a worker with "
        "eight tasks' producer buffers and fetches too little room."))
    cpus: float | None = Field(None, gt=0, le=256, description=(
        "docker: the container's CPU limit (--cpus); kubernetes: the CPU request (no CPU limit: throttling "
        "stalls JVMs). Default: no limit on docker, 250m requested on kubernetes. Ignored on local."))
    memory_mib: int | None = Field(None, ge=256, le=1_048_576, description=(
        "docker/kubernetes: the container's memory limit (kubernetes: also its request), in MiB. Default twice "
        "the heap plus 256 (metaspace, direct buffers, thread stacks, a probe JVM). Ignored on local."))
    jvm_options: list[str] = Field(default_factory=list, examples=[["-XX:TieredStopAtLevel=1"]], description=(
        "Options added to each JVM's command line after mirrorstack's own, so they win (Strimzi's jvmOptions), "
        "on every platform; for a cluster, its controllers get them too. -XX:, -Xms, -Xss, -Xlog: and -D options; "
        "a collector chosen here (-XX:+Use...GC) replaces G1. Never a secret: command lines are visible (ps, "
        "kubectl describe). Changing them restarts the JVMs one at a time."))

    @field_validator("jvm_options")
    @classmethod
    def _plain_jvm_options(cls, options: list[str]) -> list[str]:
        return plain_jvm_options(options, heap_field="heap")

    @model_validator(mode="after")
    def _room_for_the_heap(self) -> "Resources":
        if self.memory_mib is not None and self.memory_mib < java_size_mib(self.heap) + 256:
            raise ValueError(f"memory_mib {self.memory_mib} leaves no room beside a {self.heap} heap; fix: at least "
                             f"{java_size_mib(self.heap) + 256} (heap + 256 MiB), or a smaller heap")
        return self

    @property
    def container_memory_mib(self) -> int:
        return self.memory_mib or 2 * java_size_mib(self.heap) + 256


class Cluster(_Model):
    brokers: int = Field(1, ge=1, le=9, description=(
        "Brokers to deploy (default 1); for an external cluster, how many it has (default 3), "
        "which caps replication factors."))
    controllers: int = Field(1, description=(
        "KRaft controllers of a deployed cluster: 1 (default, small labs: losing it stops metadata changes), "
        "3 or 5 (a quorum: a majority must stay up, so 3 survives losing one, 5 two). The quorum is static: "
        "changing it on a deployed cluster is not supported (destroy and redeploy the cluster)."))
    settings: Properties = Field({}, description="Raw broker properties for deployed clusters; values are strings.")
    resources: Resources = Field(Resources(), description="Heap, CPUs and memory of each broker (deployed clusters).")
    external: ExternalCluster | None = Field(
        None, description="Set to use an existing cluster instead of deploying one.")
    security: Security = Field(Security(), description=(
        "Deployed clusters: TLS and SASL for clients (for an external cluster use external.security)."))
    node_ports: int | None = Field(None, ge=1, le=65535, examples=[31090], description=(
        "kubernetes only: also publish the brokers outside the cluster, broker i on NodePort `node_ports + i` "
        "of every node, each advertised at the address of the node its pod runs on (as Strimzi's nodeport "
        "listener). Must lie in the API server's NodePort range (30000-32767 by default). The stack output "
        "`node_ports` lists them. Default: reachable inside the cluster only."))

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


CONNECT_URL = re.compile(r"^https?://[^/\s:]+(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?/?$")


class ExternalConnect(_Model):
    """An existing Connect cluster: the stack manages only its own MirrorMaker 2
    connectors there, never the workers (no restart, no worker setting)."""

    urls: list[Annotated[str, Field(pattern=CONNECT_URL.pattern)]] = Field(min_length=1, examples=[
        ["https://connect-1:8083", "https://connect-2:8083"]], description=(
        "REST URLs of the workers (http:// or https://); any worker that answers serves the whole API, so "
        "list several to survive one being down."))
    username: str | None = Field(None, min_length=1, description=(
        "HTTP basic auth user of the REST API; the password is the secret "
        "`mirrorstack:connectSecrets.<name>.password` (`pulumi config set --secret --path ...`)."))
    ca_file: str | None = Field(None, min_length=1, description=(
        "PEM file (on the machine running pulumi) of the CA that signed the workers' HTTPS certificates; "
        "default: the system's trusted CAs."))
    secret_references: dict[str, Properties] = Field({}, description=(
        "Per cluster alias, how these workers read that cluster's secret client settings: a reference to a "
        "config provider the workers already have, e.g. {\"sasl.jaas.config\": "
        "\"${file:/etc/kafka/secrets/us.properties:sasl.jaas.config}\"}. mirrorstack cannot write files on "
        "workers it does not run, and Connect's config topic must never hold a secret in plaintext, so a "
        "secured cluster's secrets reach foreign workers only this way."))


class SelfHealing(_Model):
    """Restarts of a Connect group's FAILED connectors and tasks without a person
    (a supervisor beside the workers), on Strimzi's auto-restart schedule."""

    enabled: bool = Field(True, description=(
        "Run the supervisor: it restarts the failed parts of the stack's connectors, never a paused or "
        "stopped one (deployed Connect only)."))
    backoff_seconds: int = Field(60, ge=1, le=3600, description=(
        "The schedule's unit: the first restart at once, then unit × (n² + n) after the n-th "
        "(Strimzi's 0, 2, 6, 12, 20... minutes with 60)."))
    max_backoff_seconds: int = Field(3600, ge=1, le=86_400, description="The longest wait between two restarts.")
    max_restarts: int = Field(10, ge=1, le=1000, description=(
        "Restarts in a row after which the supervisor gives up on a connector (alert "
        "MirrorConnectorRestartCapReached); staying RUNNING for one back-off starts the count over."))
    check_seconds: int = Field(15, ge=1, le=600, description="How often the supervisor reads the connectors' status.")


class ConnectCluster(_Model):
    kafka: str = Field(description=(
        "Alias of the Kafka cluster the workers bootstrap to (their config, offset and status topics); for an "
        "external Connect cluster, the one its workers use."))
    workers: int = Field(1, ge=1, le=9, description="Connect workers in the group (deployed Connect only).")
    settings: Properties = Field({}, description="Raw Connect worker properties (deployed Connect only); values are strings.")
    resources: Resources = Field(Resources(), description="Heap, CPUs and memory of each worker (deployed Connect only).")
    rest_auth: bool = Field(False, description=(
        "The Connect REST API requires HTTP basic auth (user `mirrorstack`, a generated password kept secret; "
        "stack output connect_credentials). Deployed Connect only."))
    group_id: str | None = Field(None, pattern=r"^[A-Za-z0-9._-]+$", description=(
        "The workers' group.id; storage topics are <group_id>-configs|-offsets|-status. Default "
        "mirrorstack-<stack>-<name>, so stacks sharing a Kafka cluster never join one group (stacks deployed "
        "before the stack was part of it keep mirrorstack-<name>). Deployed Connect only."))
    push: bool = Field(False, description=(
        "Allow flows whose target is not this Connect cluster's kafka (push replication). Pull, the default: "
        "Connect next to the target consumes across the link and produces locally, so a slow or broken link "
        "delays reads but never half-written batches, and the workers' own topics share the target's fate. "
        "Push: Connect next to the source produces across the link (the target's bootstrap servers and client "
        "security become producer overrides of every connector of the flow); for edge sites that accept no "
        "inbound connections. Producing across a high-latency link needs more in-flight data, and an "
        "exactly-once flow keeps its source offsets in a connector-specific offsets topic on the target."))
    external: ExternalConnect | None = Field(None, description=(
        "Set to use an existing Connect cluster instead of deploying one."))
    self_healing: SelfHealing = Field(SelfHealing(), description=(
        "Failed connectors and tasks restarted without a person, with a growing back-off and a cap "
        "(docs/guides/self-healing.md). Deployed Connect only: an existing group's operator restarts its own."))

    @model_validator(mode="before")
    @classmethod
    def _renamed_remote_target(cls, data: Any, info: ValidationInfo) -> Any:
        key = renamed_key("remote_target")
        if isinstance(data, Mapping) and key.old in data:
            data = dict(data)
            value = data.pop(key.old)
            if key.new in data:
                raise ValueError(f"{key.old} is the old name of {key.new}; fix: remove {key.old}")
            data[key.new] = value
            _met_deprecated(info, key)
        return data

    @property
    def is_external(self) -> bool:
        return self.external is not None


class ConnectorNames(_Model):
    """Connector names by kind; a kind left out keeps mirrorstack's name."""

    source: str | None = Field(None, pattern=r"^[^\x00-\x1f/]+$", description="The MirrorSourceConnector's name.")
    checkpoint: str | None = Field(None, pattern=r"^[^\x00-\x1f/]+$", description="The MirrorCheckpointConnector's name.")
    heartbeat: str | None = Field(None, pattern=r"^[^\x00-\x1f/]+$", description="The MirrorHeartbeatConnector's name.")

    def by_kind(self) -> dict[str, str]:
        return {kind: name for kind, name in self.model_dump().items() if name is not None}


class ConnectorOverrides(_Model):
    source: Properties = Field({}, description="Raw MirrorSourceConnector config keys.")
    checkpoint: Properties = Field({}, description="Raw MirrorCheckpointConnector config keys.")
    heartbeat: Properties = Field({}, description="Raw MirrorHeartbeatConnector config keys.")


class Throughput(_Model):
    """The few settings that decide a flow's speed, typed and mapped to the Connect prefix that reaches the
    client (the data producer is the worker's: `producer.override.*`; the source consumer: `source.consumer.*`).
    Defaults measured by benchmarks/replication.py (docs/measurements.md: Replication speed); raw `overrides` still win."""

    batch_bytes: int = Field(262144, ge=1024, le=16 * 2**20, description=(
        "producer.override.batch.size; Kafka's 16 KB sends one small batch per partition per round trip."))
    linger_ms: int = Field(5, ge=0, le=10_000, description=(
        "producer.override.linger.ms: how long the producer waits to fill a batch (adds at most this latency); "
        "Kafka 4's 5 ms measured as fast as 20 ms with less latency."))
    in_flight: int = Field(5, ge=1, le=5, description=(
        "producer.override.max.in.flight.requests.per.connection with idempotence on (order kept up to 5); "
        "Connect's default of 1 moves one request per round trip, which a WAN link turns into the limit."))
    compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = Field("zstd", description=(
        "producer.override.compression.type. zstd: a record stored compressed on the source stays about that size "
        "on the target, so the remote topic's max.message.bytes (the source's, copied by MM2) takes it; with none, "
        "a record compressed on the source is sent whole and can exceed that limit, which stops the flow."))
    max_record_bytes: int = Field(DEFAULT_MAX_RECORD_BYTES, ge=2**20, le=100 * 2**20, description=(
        "The largest record (key, value and headers, uncompressed) the flow carries: the task producer's "
        "max.request.size, and its buffer.memory when larger. Kafka's 1 MiB refuses records that a source took "
        "compressed (RecordTooLargeException, the task dies with its partitions); the default is the producer's "
        "whole buffer (32 MiB): the broker still limits the compressed batch by the remote topic's "
        "max.message.bytes. At most 100 MiB (the broker's socket.request.max.bytes)."))
    poll_records: int = Field(500, ge=1, le=1_000_000, description=(
        "source.consumer.max.poll.records: records a source task hands to its producer per poll (Kafka's 500 "
        "measured faster than 2000)."))


def _flow_schema(schema: dict) -> None:
    # The stack file may list several sources or targets in one entry; Topology
    # expands them before validation, so the model itself only has source/target.
    for many, one in SHORTHAND.items():
        schema["properties"][many] = {
            "type": "array", "items": {"type": "string"}, "minItems": 1, "title": many.title(),
            "description": (f"Instead of {one}: several aliases, one flow each with the other fields shared; "
                            "not together with the other list.")}
    schema.pop("required", None)
    schema["allOf"] = [{"oneOf": [{"required": [one]}, {"required": [many]}]} for many, one in SHORTHAND.items()]
    schema["not"] = {"required": list(SHORTHAND)}


FlowState = Literal["running", "paused", "stopped"]


class Flow(_Model):
    model_config = ConfigDict(json_schema_extra=_flow_schema)

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
    config_sync_seconds: int | None = Field(None, ge=1, le=86_400, description=(
        "How often MM2 copies the configs of topics it already mirrors (sync.topic.configs.interval.seconds). "
        "Default: MM2's own, 600 s: a config changed on a source topic (retention, max.message.bytes) reaches "
        "its remote topic up to ten minutes later. A new topic gets its config when it is first mirrored."))
    sync_topic_acls: bool = Field(False, description="Copy topic ACLs to the target.")
    heartbeats: bool = Field(True, description="Run the heartbeat connector.")
    checkpoints: bool = Field(True, description="Run the checkpoint connector (consumer offset translation).")
    sync_group_offsets: bool = Field(
        False, description="Write translated offsets into the target's groups; needs checkpoints.")
    tasks_max: int = Field(2, ge=1, le=256, description=(
        "Source tasks (MM2 creates min(tasks_max, partitions)) and checkpoint tasks. Default 2: measured on "
        "2 cores, 2 tasks beat one task per partition (each task is a consumer and a producer); give a flow "
        "about one task per core its Connect workers have."))
    replication_factor: int | None = Field(None, ge=1, description=(
        "For remote topics and MM2's internal topics; default min(3, target brokers)."))
    throughput: Throughput = Field(Throughput(), description="Producer and consumer settings that decide speed.")
    refresh_seconds: int = Field(60, ge=1, le=86_400, description=(
        "How often MM2 looks for new topics (refresh.topics.interval.seconds) and groups "
        "(refresh.groups.interval.seconds). Default 60 s: a new topic mirrors within a minute for two metadata "
        "requests a minute (MM2's own default is 600 s); demos and tests use 10."))
    overrides: ConnectorOverrides = Field(ConnectorOverrides(), description="Raw connector configs, applied last.")
    exactly_once: bool = Field(False, description=(
        "Exactly-once replication (KIP-618): the Connect cluster's workers get exactly.once.source.support, "
        "the source connector exactly.once.support=required and read_committed consumers."))
    restart_trigger: str = Field("", description=(
        "Change this value (e.g. a date) to restart the flow's connectors and tasks on the next up "
        "(mm2.sh's redeploy)."))
    connector_names: ConnectorNames | None = Field(None, examples=[
        {"source": "mm2-msc-us", "checkpoint": "mm2-cpc-us", "heartbeat": "mm2-hbc-us"}], description=(
        "Keep these connector names instead of mirrorstack's (`<flow>.MirrorSourceConnector`): connectors "
        "of these names made by hand (mm2.sh) are adopted and reconfigured in place on the next up, their "
        "source offsets kept."))
    take_over: ConnectorNames | None = Field(None, examples=[
        {"source": "mm2-msc-us", "checkpoint": "mm2-cpc-us", "heartbeat": "mm2-hbc-us"}], description=(
        "Existing connectors (made by hand) this flow replaces: on the next up each is stopped, its source "
        "offsets are copied to the flow's connector of the same kind (Kafka's offsets REST API, KIP-875), and "
        "it is deleted, so replication goes on where it stopped. Remove it after that up."))
    rpo_seconds: float | None = Field(None, gt=0, le=86_400, examples=[60], description=(
        "The flow's recovery point objective: the continuous validation (`validation.mode: continuous`) alerts "
        "(MirrorRecoveryPointObjectiveMissed) when its oldest source record not yet on the target is older than "
        "this. Unset: no such alert (the RPO is still measured)."))
    state: FlowState = Field("running", description=(
        "running: the connectors copy. paused: Connect's pause: tasks stay assigned, nothing moves, resuming is "
        "instant. stopped: Kafka's stop (KIP-875): tasks commit their offsets and shut down, nothing is held on "
        "the workers. Both keep the connectors and their offsets, so `running` again continues where it stopped "
        "(Strimzi's `state`)."))

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    def connector_name(self, kind: str) -> str:
        """The connector of a kind (source, checkpoint, heartbeat) of this flow."""
        return self.description().connector_name(kind)

    def description(self) -> FlowDescription:
        """The flow as every other side takes it (mirrorstack.mm2.flows.FlowDescription),
        the connector generator included: every field it writes."""
        t = self.throughput
        return FlowDescription(
            name=self.name, source=self.source, target=self.target, topics=tuple(self.topics),
            topics_exclude=tuple(self.topics_exclude), groups=tuple(self.groups),
            groups_exclude=tuple(self.groups_exclude), replication_policy=self.replication_policy,
            separator=self.separator, sync_topic_configs=self.sync_topic_configs, checkpoints=self.checkpoints,
            compression=t.compression, exactly_once=self.exactly_once, heartbeats=self.heartbeats,
            sync_group_offsets=self.sync_group_offsets, sync_topic_acls=self.sync_topic_acls,
            config_sync_seconds=self.config_sync_seconds, tasks_max=self.tasks_max,
            refresh_seconds=self.refresh_seconds,
            throughput=FlowThroughput(batch_bytes=t.batch_bytes, linger_ms=t.linger_ms, in_flight=t.in_flight,
                                      max_record_bytes=t.max_record_bytes, poll_records=t.poll_records),
            overrides=OverridesByKind.of(self.overrides.model_dump()),
            connector_names=NamesByKind(**(self.connector_names or ConnectorNames()).by_kind()),
            take_over=NamesByKind(**(self.take_over or ConnectorNames()).by_kind()))

    def selection(self) -> FlowSelection:
        """What the flow copies and the names it gives (mirrorstack.mm2.flows.FlowSelection)."""
        return self.description().selection()


def _unlimited(value: Any) -> Any:
    # Pulumi drops null values from structured stack config, so a YAML `null`
    # would silently become the default 0: "no limit" is spelled `unlimited`.
    return None if value == "unlimited" else value


Limit = Annotated[int | None, BeforeValidator(_unlimited), WithJsonSchema(
    {"anyOf": [{"type": "integer", "minimum": 0}, {"const": "unlimited"}]})]


InFlightLimit = Annotated[int | Literal["wait-rate"] | None, BeforeValidator(_unlimited), WithJsonSchema(
    {"anyOf": [{"type": "integer", "minimum": 0}, {"const": "unlimited"}, {"const": "wait-rate"}]})]


class Tolerance(_Model):
    """Maxima the validation accepts; `unlimited` means no limit."""

    missing: Limit = Field(0, ge=0, description="Source records absent from the target.")
    duplicates: Limit = Field(0, ge=0, description="Target copies beyond the source's multiplicity.")
    extras: Limit = Field(0, ge=0, description="Target records no source record matches.")
    out_of_order: Limit = Field(0, ge=0, description="Pairs out of source order within a partition.")
    in_flight: InFlightLimit = Field("wait-rate", description=(
        "Records not yet replicated when the wait bound expired, on target partitions that were still taking "
        "records (elsewhere they are missing: stalled). `wait-rate`: at most what the target took during the "
        "wait, scaled to another wait of the same bound; `unlimited`: no limit."))
    lost: Limit = Field(0, ge=0, description="Records a consumer group would skip failing over.")
    purged: Limit = Field(0, ge=0, description=(
        "Source records deleted (retention, delete-records) before MM2 copied them, from the flow's offset syncs."))


class ContinuousValidation(_Model):
    """The continuous validation's settings (`validation.mode: continuous` or `both`)."""

    window_seconds: float = Field(60, ge=5, le=86_400, description=(
        "A source record whose copy has not arrived this long after the validator read it counts as missing "
        "(alert MirrorRecordsMissing), and a target record with no source record for as long as an extra. Longer "
        "than the flows' worst replication latency; the validator's state grows with window x rate."))
    trigger_seconds: float = Field(2, ge=0.5, le=600, description=(
        "A micro-batch every this many seconds: latencies and the RPO are measured to within it."))
    driver_memory: str = Field("1g", pattern=r"^[1-9][0-9]*[kmgt]$", description=(
        "Heap of the validator's Spark driver (which runs its local executors)."))
    checkpoint_location: str | None = Field(None, min_length=1, examples=["hdfs://namenode:8020/mirrorstack",
                                                                        "/mnt/shared/mirrorstack"], description=(
        "Where the validator keeps its checkpoint (Kafka offsets read and the ledgers): a folder or a URI its Spark "
        "writes. Default: a folder of its own the platform keeps. On a standalone cluster the executors write "
        "the ledgers there and on a Spark Connect server the server does: when they are on other machines, give "
        "a location they all reach (a shared mount, hdfs://, s3a:// with the cluster's own jars)."))


class Validation(_Model):
    """The Spark validation: the job (spark/validate_replication.py) run by `pulumi up`
    once the flows are RUNNING, its report the stack output `validation`; and/or
    (`mode`) the continuous validator beside the flows (spark/streaming.py)."""

    flows: list[str] | None = Field(None, description=(
        "Flow names (`us->central`) to validate; default all. Each flow's own topic and group regexes apply."))
    mode: Literal["once", "continuous", "both"] = Field("once", description=(
        "once: `pulumi up` runs the job once the flows run (its report the stack output `validation`). "
        "continuous: a validator runs beside the flows all the time (Spark Structured Streaming), matching every "
        "record with its copy within `continuous.window_seconds`, and exports confirmed, missing, duplicate "
        "records, end-to-end latency and the RPO per flow to the stack's Prometheus; `up` runs no job. both: "
        "the two."))
    continuous: ContinuousValidation = Field(ContinuousValidation(), description=(
        "The continuous validator's window, batch interval and memory (mode continuous or both)."))
    report_only: bool = Field(False, description="Report a failed validation without failing `pulumi up`.")
    wait_seconds: float = Field(120, ge=0, le=86400, description=(
        "How long the job waits for the targets to catch up with the source snapshot."))
    tolerance: Tolerance = Field(Tolerance(), description="Counts the validation accepts.")
    window: str = Field("1h", pattern=r"^(all|[1-9][0-9]*[smhd])$", examples=["1h", "15m", "2d", "all"], description=(
        "Check only records whose timestamp (MM2 copies the source's) lies within this long before the run "
        "starts, read from each partition's first offset in it (Kafka's time index), so a topic's retention "
        "does not bound the work; `all`: the whole history the topics hold."))
    min_records: int = Field(0, ge=0, description=(
        "Fail when fewer records than this were checked; with 0 a run that checked nothing is reported as "
        "`nothing-checked` (with `passed` false: nothing was verified) and does not fail `up`."))
    run_id: str = Field("", description=(
        "Change this value (e.g. a date, or `pulumi up --config mirrorstack:validationRunId=...`) to run the "
        "validation again on the next up; it also re-runs whenever its inputs change."))
    driver_memory: str = Field("1g", pattern=r"^[1-9][0-9]*[kmgt]$", description=(
        "Heap of the Spark driver (which runs the local executors); the job's memory does not grow with N."))
    master: str = Field("local[2]", min_length=1, examples=[
        "local[2]", "spark://spark-master.example.com:7077", "sc://spark-connect.example.com:15002"], description=(
        "Where the job's Spark runs (local platform; docker and kubernetes run it in a container, `local[*]`): "
        "`local[N]` in the job's own JVM; a standalone cluster's master `spark://host:port` (several: "
        "`spark://h1:7077,h2:7077`), whose executors must reach the flows' clusters and this machine (the "
        "driver runs here); or a Spark Connect server `sc://host:port` (default port 15002), which must have "
        "the spark-sql-kafka jars and reach the flows' clusters (the job reads offsets here, with "
        "confluent_kafka); or, on kubernetes, `k8s://https://kubernetes.default.svc`: the Job's pod is the "
        "driver and starts `executor_instances` executor pods (Spark's Kubernetes scheduler, with a "
        "ServiceAccount and Role of their own). The continuous validator (`mode` continuous or both) runs on the "
        "same Spark: the standalone cluster's executors, the Connect server, or executor pods of its own; with "
        "`local[N]`, `local[2]` in its own process, container or pod. A master that does not answer fails the "
        "run before the job starts."))
    executor_memory: str | None = Field(None, pattern=r"^[1-9][0-9]*[kmgt]$", examples=["2g"], description=(
        "A `spark://` master's executors: the memory of each (spark.executor.memory); default the cluster's (1g). "
        "An executor no worker has room for never starts: the job fails after `executor_wait_seconds`."))
    executor_cores: int | None = Field(None, ge=1, le=1024, description=(
        "A `spark://` master's executors: the cores of each (spark.executor.cores); default the cluster's."))
    executor_instances: int | None = Field(None, ge=1, le=1000, description=(
        "A `k8s://` master: how many executor pods the driver starts (spark.executor.instances); default 2."))
    max_cores: int | None = Field(None, ge=1, le=100000, description=(
        "A standalone master: the job's cores in all (spark.cores.max); default every free core of the cluster."))
    executor_wait_seconds: float = Field(60, gt=0, le=3600, description=(
        "A `spark://` master: how long the job waits for its first executor before it fails naming what it asked "
        "for (Spark itself would wait for ever)."))
    jvm_options: list[str] = Field(default_factory=list, examples=[["-XX:TieredStopAtLevel=1"]], description=(
        "Options for the Spark driver's JVM (which runs the local executors), and for the executor pods' of a "
        "`k8s://` master, after mirrorstack's own, so they win; the same kinds as `resources.jvm_options`. A "
        "standalone cluster's executors keep the cluster's own. On local the job picks C1 by itself for fewer than "
        "1.2 million source records; on docker and kubernetes spark-submit starts the JVM before the job knows "
        "its size, so a small check runs on C2 unless `-XX:TieredStopAtLevel=1` is set here (measured: 0.51x "
        "the CPU at 1,000 records; the time at 1M records 0.93x, at 2M 1.2x). Changing them runs the job again."))
    submit: Literal["up", "yourself"] = Field("up", description=(
        "`up`: `pulumi up` runs the job (where `master` says). `yourself`: `up` hands the job out instead, for a "
        "Spark mirrorstack does not run (EMR, Dataproc, Databricks, your own spark-submit): its files in "
        "`.mirrorstack/<stack>/validation-job-submit/` and the exact spark-submit command in the stack output "
        "`validation.submit`; the job writes its report to its topic on the first validated target, and a later "
        "`up` reads it there (and fails on a failed validation, as ever). local only."))
    report_within_hours: float = Field(24, gt=0, le=720, description=(
        "`submit: yourself`: an `up` this long after the command was handed out that finds no report from it "
        "fails, naming the command and the topic; a new `run_id` hands out a new command."))
    schedule: str | None = Field(None, pattern=r"^(@\w+|\S+( \S+){4})$", examples=["0 * * * *"], description=(
        "kubernetes only: also run it as a CronJob on this cron schedule (continuous checks)."))

    @field_validator("jvm_options")
    @classmethod
    def _plain_jvm_options(cls, options: list[str]) -> list[str]:
        return plain_jvm_options(options, heap_field="validation.driver_memory")

    @property
    def runs_once(self) -> bool:
        """`up` runs the one-shot job."""
        return self.mode in ("once", "both")

    @property
    def runs_continuously(self) -> bool:
        return self.mode in ("continuous", "both")

    @property
    def standalone_executors(self) -> dict | None:
        """What a standalone master's executors are asked for, the settings given (None elsewhere:
        `local[N]` runs them in its driver, a Spark Connect server sizes its own, executor pods are
        sized by the pods' settings)."""
        if master_kind(self.master) != "standalone":
            return None
        asked = {key: getattr(self, key) for key in ("executor_memory", "executor_cores", "max_cores",
                                                     "executor_wait_seconds")}
        return {key: value for key, value in asked.items() if value is not None}

    @property
    def runs_executor_pods(self) -> bool:
        """The driver (the Job's pod) starts its executors as pods: a `k8s://` master."""
        return master_kind(self.master) == "kubernetes"

    @field_validator("master")
    @classmethod
    def _known_master(cls, master: str) -> str:
        problem = spark_master_problem(master)
        if problem:
            raise ValueError(problem)
        return master


# An image reference: [registry[:port]/]path[:tag][@digest]; what `docker pull` accepts.
IMAGE_REF = r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$"


class Images(_Model):
    """The images the docker and kubernetes platforms run; unset: the pinned
    official image. `make images` builds the Kafka, Spark and Prometheus ones
    from Debian packages and `.tools` (no registry needed); point these at your
    registry's copies (the air-gapped case). On kubernetes the Kafka image must
    carry the JMX exporter agent (metrics) and the Spark image the
    spark-sql-kafka jars (validation): the official images do not."""

    kafka: str | None = Field(None, pattern=IMAGE_REF, examples=["registry.example.com/mirrorstack/kafka:4.3.1"],
                              description="Brokers, controllers, Connect; default apache/kafka:<pinned Kafka>.")
    spark: str | None = Field(None, pattern=IMAGE_REF, description=(
        "The validation job; default apache/spark:<pinned Spark>-python3."))
    prometheus: str | None = Field(None, pattern=IMAGE_REF, description="Default: the pin in components/versions.env.")
    grafana: str | None = Field(None, pattern=IMAGE_REF, description="Default: the pin in components/versions.env.")
    kafka_ui: str | None = Field(None, pattern=IMAGE_REF, description="Default: the pin in components/versions.env.")
    kafka_exporter: str | None = Field(None, pattern=IMAGE_REF, description=(
        "Default: the pin in components/versions.env."))

    def of(self, key: str) -> str:
        """The image for `key`: the one set here, else the pinned official one."""
        return getattr(self, key) or official_image(key)


DURATION = r"^[0-9]+[smh]$"


class Monitoring(_Model):
    """JMX exporters on every Kafka and Connect JVM, Prometheus with alert rules,
    Grafana dashboards (a Grafana server on docker/kubernetes; files on local)."""

    scrape_interval: str = Field("15s", pattern=DURATION, description="Prometheus scrape and rule interval.")
    latency_threshold_ms: int = Field(30_000, ge=1, description="Replication latency that raises an alert.")
    stalled_minutes: int = Field(10, ge=1, le=1440, description=(
        "Alert when a flow replicated nothing for this long while its source topics grew."))
    failed_for: str = Field("1m", pattern=DURATION, description="How long a connector/task is FAILED before alerting.")
    grafana: bool = Field(True, description="docker/kubernetes: run Grafana with the dashboards provisioned.")
    kafka_ui: bool = Field(False, description="docker/kubernetes: run Kafka UI (kafbat) for every cluster.")
    kafka_exporter: bool = Field(False, description=(
        "docker/kubernetes: run kafka-exporter per cluster (consumer lag, topic offsets), scraped too."))


class FailoverGate(_Model):
    """What a planned switch checks before anything changes (the readiness gate)."""

    in_flight: int = Field(0, ge=0, description=(
        "Records on the side being left not yet copied by the flow that the switch still accepts (they stay behind)."))
    wait_seconds: float = Field(120, ge=0, le=3600, description=(
        "How long the gate waits for replication and checkpoints to catch up before it fails `up`."))
    allow_active_consumers: bool = Field(False, description=(
        "Switch although consumers of the moved groups are still active on the side being left (their commits "
        "after the switch are lost to the other side)."))


class FailoverDrill(_Model):
    """A rehearsal of the switch that moves no one: while the flow and the consumers go on, copies of the
    groups on the other side are written where the switch would put them, proved by record identity and
    deleted; the report gives the measured RPO and RTO."""

    run: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$", description=(
        "The drill's name, e.g. its date (2026-12-03): a drill runs at the `up` that sets or changes it. Its "
        "copies of the groups are named mirrorstack-drill.<run>.<group>."))
    rpo_seconds: float = Field(60, gt=0, le=86400, description=(
        "Recovery point objective: the drill fails when the oldest record of the active side not yet on the "
        "other side is older than this."))
    rpo_records: int | None = Field(None, ge=0, description=(
        "The drill also fails when more records than this are not yet on the other side; none: no limit."))
    wait_seconds: float = Field(60, ge=0, le=3600, description=(
        "How long the drill waits for the flow to run within the objective before it fails `up`."))
    proof_records: int = Field(100, ge=1, le=100_000, description=(
        "Per group and partition, how many records its group had not read the proof compares with what the "
        "copy reads."))
    pass_within_days: float = Field(90, gt=0, le=3650, description=(
        "With monitoring, the alert MirrorstackFailoverDrillOverdue fires when no drill passed for this long."))


class Failover(_Model):
    """Which side of an active/passive pair (or a migration) clients use. Changing
    `active` and running `up` is the switch: the gate, the flow stopped, every
    group's offsets translated and written on the other side, the report."""

    primary: str = Field(description="Alias of the cluster clients use in normal times (migration: the old one).")
    standby: str = Field(description="Alias of the cluster that takes over (migration: the new one).")
    active: str = Field(description=(
        "Which side clients use now: `standby` fails over, back to `primary` fails back (a reviewed `up`)."))
    cutover: bool = Field(False, description=(
        "Migration: the switch to standby is final (no reverse flow, no way back)."))
    unplanned: bool = Field(False, description=(
        "The side being left is lost: switch from the last checkpoints, no gate; remove it once that side is back "
        "(the reverse flow then starts)."))
    groups: list[str] | None = Field(None, description=(
        "Regexes of the consumer groups moved; default: the forward flow's `groups`."))
    gate: FailoverGate = Field(FailoverGate(), description="The readiness gate of a planned switch.")
    exact: bool = Field(True, description=(
        "A planned switch moves each group to the copy of the first record it has not read, found by record "
        "identity (key, value, headers, timestamp) from MM2's translated offset on: nothing re-read, nothing lost. "
        "false: MM2's translation alone (a group re-reads up to offset.lag.max records a partition, or more)."))
    exact_search_records: int = Field(100_000, ge=1, le=100_000_000, description=(
        "How many records past MM2's translated offset a planned switch reads, per group and partition, to find "
        "that copy; none found (deleted by retention, say), the partition keeps MM2's translation and the report "
        "says why."))
    drill: FailoverDrill | None = Field(None, description=(
        "A failover drill from the active side: the gate's RPO check and the switch's positions, for copies of "
        "the groups; no real group, connector or flow is touched."))


def _moved_spark_image(data: Mapping, info: ValidationInfo) -> Mapping:
    """`validation.image` became `images.spark` (one place for every image)."""
    key = renamed_key("validation.image")
    (section, old), (new_section, new) = key.old.split("."), key.new.split(".")
    validation = data.get(section)
    if not isinstance(validation, Mapping) or old not in validation:
        return data
    images = dict(data.get(new_section) or {})
    if new in images:
        raise TopologyError([f"{key.old}: the old name of {key.new}; fix: remove {key.old}"])
    images[new] = validation[old]
    _met_deprecated(info, key)
    return {**data, section: {k: v for k, v in validation.items() if k != old}, new_section: images}


class Topology(_Model):
    """A MirrorMaker 2 replication topology: the `mirrorstack:topology` stack config value."""

    _warnings: list[str] = PrivateAttr(default_factory=list)  # deprecated keys, set by load_topology

    @property
    def warnings(self) -> list[str]:
        return self._warnings

    platform: str = Field("local", description=(
        "Where the clusters run: a registered platform, built in local, docker or kubernetes; an installed "
        "package adds others (its `mirrorstack.platforms` entry point; this schema lists the built-in ones)."),
        json_schema_extra={"enum": list(BUILT_IN)})
    clusters: dict[str, Cluster] = Field(min_length=1, description="Kafka clusters by alias.")
    connect: dict[str, ConnectCluster] = Field({}, description=(
        "Connect clusters by name; default: one per flow target, named after it, topics on the target."))
    flows: list[Flow] = Field(min_length=1, description=(
        "Replication flows, one per source -> target pair; an entry with `sources` or `targets` is one per alias."))
    monitoring: Monitoring | None = Field(None, description=(
        "JMX exporters, Prometheus, alert rules and Grafana dashboards (omit for none)."))
    validation: Validation | None = Field(None, description=(
        "Run the Spark validation job after the flows are up (omit for none)."))
    failover: Failover | None = Field(None, description=(
        "Active/passive or migration: which side clients use; changing `active` switches them (omit for none)."))
    images: Images = Field(Images(), description="docker/kubernetes: the images run; default the pinned official ones.")
    principals: dict[Annotated[str, Field(pattern=USER_NAME)], Principal] = Field({}, description=(
        "Application users of authorizing clusters and their rights (ACLs), by user name."))
    kubernetes: KubernetesSettings | None = Field(None, description=(
        "platform kubernetes only: storage class, size and deletion policy, pod shutdown time, the "
        "NetworkPolicy and its clients (omit for the defaults)."))

    @field_validator("platform")
    @classmethod
    def _registered_platform(cls, name: str) -> str:
        if (problem := unknown_platform(name)) is not None:  # before any resource exists
            raise ValueError(problem)
        return name

    @model_validator(mode="before")
    @classmethod
    def _expand_shorthand(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, Mapping) or not isinstance(data.get("flows"), list):
            return data  # pydantic names what is wrong
        data = _moved_spark_image(data, info)
        flows, origins, problems = expand_flows(data["flows"])
        if problems:  # the flows cannot be counted until these are fixed
            raise TopologyError(problems)
        if info.context is not None:
            info.context["origins"] = origins
        return {**data, "flows": flows}

    @model_validator(mode="after")
    def _check_and_resolve(self, info: ValidationInfo) -> Topology:
        # Flows without `connect` run on a Connect cluster named after their target.
        defaults = {f.target for f in self.flows if f.connect in (None, f.target) and f.target in self.clusters}
        defaults -= self.connect.keys()
        origins = (info.context or {}).get("origins")
        if origins is None or len(origins) != len(self.flows):  # validated without the expansion step
            origins = tuple(FlowOrigin(i) for i in range(len(self.flows)))
        problems = rule_problems(self, known_connect=self.connect.keys() | defaults, origins=origins)
        problems = list(dict.fromkeys(problems))  # a shared field of an expanded entry fails once
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

    def validated_flows(self) -> list[Flow]:
        if self.validation is None:
            return []
        names = self.validation.flows
        return [f for f in self.flows if names is None or f.name in names]

    @property
    def validates_continuously(self) -> bool:
        """The continuous validator runs beside the flows (`validation.mode` continuous or both)."""
        return self.validation is not None and self.validation.runs_continuously

    def validation_reports_to(self) -> str | None:
        """The cluster the validation job writes its report to (mirrorstack.mm2.validation_reports):
        the first validated flow's target; None without validation."""
        validated = self.validated_flows()
        return validated[0].target if validated else None

    def failover_flow(self, source: str, target: str) -> Flow | None:
        return next((f for f in self.flows if (f.source, f.target) == (source, target)), None)

    def forward_flow(self) -> Flow | None:
        """The failover section's primary -> standby flow."""
        fo = self.failover
        return self.failover_flow(fo.primary, fo.standby) if fo else None

    def reverse_flow(self) -> Flow | None:
        """The failover section's standby -> primary flow (failback), if any."""
        fo = self.failover
        return self.failover_flow(fo.standby, fo.primary) if fo else None

    def flow_state(self, flow: Flow) -> FlowState:
        """The state the flow's connectors must be in: the one place that decides
        it (the MirrorMaker2 component and the outputs read it here). A failover
        section stops the direction away from the inactive side, and both while
        `unplanned` (the side left is lost: nothing to copy to or from it)."""
        fo = self.failover
        if fo is not None and (flow.source, flow.target) in ((fo.primary, fo.standby), (fo.standby, fo.primary)):
            if flow.source != fo.active or fo.unplanned:
                return "stopped"
        return flow.state

    def authorizes(self, alias: str) -> bool:
        """Whether the deployed cluster `alias` runs the authorizer (deny by default)."""
        cluster = self.clusters[alias]
        sec = cluster.security
        if cluster.is_external or not sec.identifies_clients:
            return False
        return sec.authorization is not False  # unset: on

    def remote_topic(self, flow: Flow, topic: str) -> str:
        return flow.selection().remote(topic)


def load_topology(data: Mapping) -> Topology:
    """Validate the stack's topology config; raise TopologyError listing every
    problem. Deprecated keys still work: `Topology.warnings` names them."""
    context: dict = {"deprecated": [], "origins": None}  # this validation's (see _met_deprecated)
    try:
        topology = Topology.model_validate(data, context=context)
    except ValidationError as e:
        raise TopologyError(validation_problems(e, Topology, context["origins"] or ())) from None
    topology._warnings = [f"mirrorstack:topology: `{key.old}` is deprecated; fix: rename it to `{key.new}` "
                          "(same meaning)" for key in dict.fromkeys(context["deprecated"])]
    return topology


def topology_json_schema() -> dict:
    schema = Topology.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "mirrorstack topology (the mirrorstack:topology stack config value)"
    return schema


def render_json_schema() -> str:
    return json.dumps(topology_json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # `python -m mirrorstack.model.spec` regenerates the committed schema
    SCHEMA_FILE.parent.mkdir(exist_ok=True)
    SCHEMA_FILE.write_text(render_json_schema())
