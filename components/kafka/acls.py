"""Authorization of deployed clusters: the authorizer's broker settings and the
ACLs each principal needs, derived from the topology.

MirrorMaker 2's rights were found by running the secure stack against a
deny-by-default cluster and reading the authorizer's denials (docs/guides/
authorization.md has the table and how it was measured). Each ACL carries the
parts of a flow that need it, so a plan or a denial names what breaks.
Pure: no pulumi.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from mirrorstack.failover.rules import DRILL_PREFIX
from mirrorstack.mm2.connectors import connector_names
from mirrorstack.mm2.flows import HEARTBEATS, FlowDescription, FlowSelection
from mirrorstack.mm2.validation_reports import REPORT_TOPIC
from mirrorstack.model.users import NODE_PRINCIPAL

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# Every node certificate the stack issues (CN=<alias>-broker-<i> / <alias>-controller[-<i>], O=mirrorstack)
# maps to one super user (model/users.py: a name no SASL user can take): adding a broker changes no node's settings.
NODE_MAPPING_RULE = rf"RULE:^CN=.+-(broker|controller)(-[0-9]+)?,O=mirrorstack$/{NODE_PRINCIPAL}/,DEFAULT"
LINE = re.compile(r"^allow (?P<principal>\S+) (?P<operation>[A-Z_]+) on (?P<resource>[A-Z_]+) (?P<name>.+) "
                  r"\((?P<pattern>LITERAL|PREFIXED)\) for (?P<parts>.+)$")
VALIDATION_GROUPS = "mirrorstack-validate-"  # the job's offset reader (spark/offsets.py): one random id a run
PLAIN_NAME = re.compile(r"[A-Za-z0-9_-]+(?:(?:\\\.|\.)[A-Za-z0-9_-]+)*")


def authorizer_settings() -> dict[str, str]:
    """Broker and controller settings: StandardAuthorizer, deny by default, the nodes as super users."""
    return {"authorizer.class.name": AUTHORIZER, "allow.everyone.if.no.acl.found": "false",
            "super.users": f"User:{NODE_PRINCIPAL}", "ssl.principal.mapping.rules": NODE_MAPPING_RULE}


@dataclass(frozen=True, order=True)
class Acl:
    """ALLOW `principal` `operation` on a resource (TOPIC, GROUP, TRANSACTIONAL_ID, CLUSTER)."""
    principal: str
    resource: str
    name: str
    pattern: str
    operation: str

    def text(self) -> str:
        """`allow User:mirrorstack READ on TOPIC orders (LITERAL)`: the ACL alone, in words."""
        return f"allow {self.principal} {self.operation} on {self.resource} {self.name} ({self.pattern})"

    def line(self, parts: Iterable[str]) -> str:
        """`allow User:mirrorstack READ on TOPIC orders (LITERAL) for source read`: a plan's line."""
        return f"{self.text()} for {', '.join(sorted(set(parts)))}"

    @classmethod
    def parse(cls, line: str) -> tuple["Acl", list[str]]:
        m = LINE.match(line)
        if m is None:
            raise ValueError(f"not an ACL line: {line!r}")
        acl = cls(m["principal"], m["resource"], m["name"], m["pattern"], m["operation"])
        return acl, m["parts"].split(", ")


class AclSet:
    """ACLs with the parts that need each: the union of every owner's."""

    def __init__(self) -> None:
        self._parts: dict[Acl, set[str]] = {}

    def allow(self, principal: str, resource: str, names: Iterable[tuple[str, str]], operations: Iterable[str],
              part: str) -> None:
        for pattern, name in names:
            for operation in operations:
                self._parts.setdefault(Acl(principal, resource, name, pattern, operation.upper()), set()).add(part)

    def lines(self) -> list[str]:
        return [acl.line(parts) for acl, parts in sorted(self._parts.items())]

    def __len__(self) -> int:
        return len(self._parts)


def resource_names(patterns: Iterable[str]) -> list[tuple[str, str]]:
    """Java regexes as ACL names: a plain name (a `.` in it read as itself) is
    LITERAL, `<plain>.*` is PREFIXED, anything else every name (`*`): ACLs
    cannot say more, and a name the ACL misses is only invisible to MM2."""
    names: list[tuple[str, str]] = []
    for pattern in patterns:
        if PLAIN_NAME.fullmatch(pattern):
            names.append(("LITERAL", pattern.replace("\\.", ".")))
        elif pattern.endswith(".*") and PLAIN_NAME.fullmatch(pattern[:-2].rstrip("\\.")):
            prefix = pattern[:-2]
            names.append(("PREFIXED", prefix.replace("\\.", ".")) if prefix else ("LITERAL", "*"))
        else:
            names.append(("LITERAL", "*"))
    return list(dict.fromkeys(names))


def _remote(selection: FlowSelection, flow, names: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(kind, name if name == "*" else selection.remote(name)) for kind, name in names]


def flow_acls(acls: dict[str, AclSet], flow: FlowDescription, *, principals: dict[str, str], connect_kafka: str,
              connect_group: str, transactional: bool, validated: bool) -> None:
    """Add what flow `flow` needs on its source and target to `acls` (alias →
    AclSet; only authorizing clusters are keys). `principals`: alias → the
    principal mirrorstack's clients are there; `transactional`: its Connect
    group runs exactly-once source support."""
    selection = flow.selection()
    topics = resource_names(flow.topics)
    remote = _remote(selection, flow, topics)
    groups = resource_names(flow.groups)
    source, target = flow.source, flow.target
    flow_part = f"flow {flow.name}"
    cluster = [("LITERAL", "kafka-cluster")]
    if source in acls:
        add = _adder(acls[source], principals[source], flow_part)
        add("TOPIC", topics + [("LITERAL", HEARTBEATS)], ["READ", "DESCRIBE"], "source read")
        # the preview's plan compares record-size limits (topic max.message.bytes, broker message.max.bytes)
        add("TOPIC", topics, ["DESCRIBE_CONFIGS"], "replication plan")
        add("CLUSTER", cluster, ["DESCRIBE_CONFIGS"], "replication plan")
        if flow.sync_topic_configs:
            add("TOPIC", topics, ["DESCRIBE_CONFIGS"], "topic-config sync")
        if flow.sync_topic_acls:
            add("CLUSTER", cluster, ["DESCRIBE"], "ACL sync")
        if flow.checkpoints:
            add("GROUP", groups, ["DESCRIBE"], "checkpoints")
        if validated:
            add("TOPIC", topics, ["READ", "DESCRIBE"], "validation")
            add("GROUP", [("PREFIXED", VALIDATION_GROUPS)], ["DESCRIBE"], "validation")
    if target in acls:
        add = _adder(acls[target], principals[target], flow_part)
        remote_heartbeats = ("LITERAL", selection.remote(HEARTBEATS))
        add("TOPIC", remote + [remote_heartbeats], ["CREATE", "WRITE", "DESCRIBE"], "target write")
        add("TOPIC", remote, ["ALTER"], "target write")  # partitions added as the source grows
        add("TOPIC", remote, ["DESCRIBE_CONFIGS"], "replication plan")
        add("CLUSTER", cluster, ["DESCRIBE_CONFIGS"], "replication plan")
        if flow.sync_topic_configs:
            add("TOPIC", remote, ["DESCRIBE_CONFIGS", "ALTER_CONFIGS"], "topic-config sync")
        if flow.sync_topic_acls:
            add("CLUSTER", cluster, ["ALTER", "DESCRIBE"], "ACL sync")
        add("TOPIC", [("LITERAL", selection.mm2.offset_syncs_topic(source))],
            ["CREATE", "WRITE", "READ", "DESCRIBE", "DESCRIBE_CONFIGS"], "offset syncs")
        if flow.checkpoints:
            add("TOPIC", [("LITERAL", selection.mm2.checkpoints_topic(source))],
                ["CREATE", "WRITE", "READ", "DESCRIBE", "DESCRIBE_CONFIGS"], "checkpoints")
            if flow.sync_group_offsets:
                add("GROUP", groups, ["READ", "DESCRIBE"], "group offset sync")
                add("TOPIC", remote, ["READ"], "group offset sync")
        if flow.heartbeats:
            add("TOPIC", [("LITERAL", HEARTBEATS)], ["CREATE", "WRITE", "DESCRIBE", "DESCRIBE_CONFIGS"], "heartbeats")
        if transactional:  # on such workers every source task writes in transactions: <group>-<connector>-<task>
            tasks = [("PREFIXED", f"{connect_group}-{name}-") for name in connector_names(flow)]
            add("TRANSACTIONAL_ID", tasks, ["WRITE", "DESCRIBE"], "exactly-once")
            if flow.exactly_once and connect_kafka != target:  # pushed: the connector's own offsets topic there
                add("TOPIC", [("LITERAL", f"{connect_group}-offsets")], ["CREATE", "WRITE", "READ", "DESCRIBE"],
                    "exactly-once")
        if validated:
            add("TOPIC", remote, ["READ", "DESCRIBE"], "validation")
            add("GROUP", [("PREFIXED", VALIDATION_GROUPS)], ["DESCRIBE"], "validation")


def failover_acls(acls: dict[str, AclSet], flows: Iterable[FlowDescription], groups: list[str] | None, *,
                  principals: dict[str, str], drill: bool = False) -> None:
    """What the failover switch needs, as mirrorstack's client on each side of
    each of the pair's flows: it reads the moved groups' offsets where they
    leave and writes them where they arrive (GROUP DESCRIBE, READ: Kafka asks
    READ to alter a group's offsets), and reads the records at their positions
    and their copies (TOPIC READ, DESCRIBE). `groups`: failover.groups, else
    each flow's own groups."""
    for flow in flows:
        topics = resource_names(flow.topics)
        names = resource_names(groups or flow.groups)
        for alias, copied in ((flow.source, topics), (flow.target, _remote(flow.selection(), flow, topics))):
            if alias in acls:
                add = _adder(acls[alias], principals[alias], f"failover {flow.name}")
                add("GROUP", names, ["READ", "DESCRIBE"], "groups' offsets")
                add("TOPIC", copied, ["READ", "DESCRIBE"], "exact positions")
                if drill and alias == flow.target:  # it writes, proves and deletes copies of the groups there
                    add("GROUP", [("PREFIXED", DRILL_PREFIX)], ["READ", "DESCRIBE", "DELETE"], "drill copies")


def connect_acls(acls: AclSet, principal: str, group_id: str, *, exactly_once: bool) -> None:
    """A Connect group's own rights on the cluster its workers bootstrap to."""
    add = _adder(acls, principal, f"connect {group_id}")
    add("GROUP", [("LITERAL", group_id)], ["READ", "DESCRIBE"], "worker group")
    storage = [("LITERAL", f"{group_id}-{kind}") for kind in ("configs", "offsets", "status")]
    add("TOPIC", storage, ["CREATE", "READ", "WRITE", "DESCRIBE", "DESCRIBE_CONFIGS"], "worker storage")
    if exactly_once:  # the leader writes the config topic transactionally (KIP-618)
        add("TRANSACTIONAL_ID", [("LITERAL", f"connect-cluster-{group_id}")], ["WRITE", "DESCRIBE"], "exactly-once")


def principal_acls(acls: AclSet, name: str, principal) -> None:
    """An application principal's grants, as declared."""
    for grant in principal.allow:
        kind, value = grant.resource
        acls.allow(f"User:{name}", kind.upper(), [(grant.pattern.upper(), value)], grant.operations,
                   f"principal {name}")


def _adder(acls: AclSet, principal: str, owner: str):
    def add(resource: str, names, operations, part: str) -> None:
        acls.allow(principal, resource, names, operations, f"{owner}: {part}")
    return add


def topology_acls(topology, aliases: list[str], principals: dict[str, str],
                  group_ids: dict[str, str]) -> dict[str, list[str]]:
    """alias → the ACL lines its Connect groups, the flows and the application
    principals need there, for each of `aliases`."""
    sets = {alias: AclSet() for alias in aliases}
    flows = topology.flows_by_connect()
    for name, spec in topology.connect.items():
        if spec.kafka in sets and not spec.is_external:
            connect_acls(sets[spec.kafka], principals[spec.kafka], group_ids[name],
                         exactly_once=any(f.exactly_once for f in flows[name]))
    validated = {f.name for f in topology.validated_flows()}
    for flow in topology.flows:
        flow_acls(sets, flow.description(), principals=principals,
                  connect_kafka=topology.connect[flow.connect].kafka,
                  connect_group=group_ids[flow.connect], validated=flow.name in validated,
                  transactional=any(f.exactly_once for f in flows[flow.connect]))
    if topology.failover is not None:
        pair = [f.description() for f in (topology.forward_flow(), topology.reverse_flow()) if f is not None]
        failover_acls(sets, pair, topology.failover.groups, principals=principals,
                      drill=topology.failover.drill is not None)
    reports_to = topology.validation_reports_to()
    if reports_to in sets:  # the validation job writes its report there, and `up` reads it
        _adder(sets[reports_to], principals[reports_to], "validation")(
            "TOPIC", [("LITERAL", REPORT_TOPIC)], ["CREATE", "WRITE", "READ", "DESCRIBE"], "its report")
    for name, principal in topology.principals.items():
        if principal.cluster in sets:
            principal_acls(sets[principal.cluster], name, principal)
    return {alias: s.lines() for alias, s in sets.items()}


def keyed(lines: Iterable[str]) -> dict[str, str]:
    """Plan lines as the ACL resource keeps them, {the ACL: the parts that need it}: a
    diff of a map shows each ACL added or removed as its own line (`+`/`-`), where a
    list's diff pairs unrelated lines by position once one is inserted."""
    return {acl.text(): ", ".join(parts) for acl, parts in map(Acl.parse, lines)}


def lines_of(acls: dict[str, str] | list[str] | None) -> list[str]:
    """The plan lines of `keyed` (or of a list, as state written before it holds
    them), in the plan's order."""
    if isinstance(acls, dict):
        acls = [f"{text} for {parts}" for text, parts in acls.items()]
    return sorted(acls or [], key=lambda line: Acl.parse(line)[0])


def external_plan(alias: str, lines: list[str]) -> str:
    """What a preview says about an external cluster: mirrorstack creates no
    ACL there, its owners grant these (if it authorizes) before the flows start."""
    head = (f"ACLs needed on {alias} (external: mirrorstack creates none; if it runs an authorizer, "
            f"its owners grant these before the flows start)")
    return "\n".join([head, *(f"  {line}" for line in lines)])


def external_principal(security) -> str:
    """The principal mirrorstack's clients are on an external cluster, as its
    authorizer sees them (Kafka's default principal builder)."""
    if security.protocol.startswith("SASL_"):
        return f"User:{security.username}"  # the model requires it with SASL
    if security.mtls:
        return "User:<your-client-certificate-subject>"
    return "User:ANONYMOUS"  # no name: what Kafka calls every such client


def client_principal(alias: str, security) -> str:
    """The principal mirrorstack's own clients are on a deployed cluster."""
    if security.sasl_mechanism:
        return f"User:{security.user}"
    return f"User:CN={alias}-client,O=mirrorstack"  # the client certificate's subject
