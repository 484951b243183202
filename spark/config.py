"""The job's input: the flows JSON (`--config`), checked field by field
(BadInput names each bad field), `${file:...}` references resolved, topic
patterns resolved against the source's topics, flows grouped by the target
topic they land in. Pure Python: no Spark, no Kafka client.

A flow comes in one of two forms: the control plane's, `flow` a
FlowDescription's to_dict beside the clusters' addresses and clients; or the
flat form written by hand (spark/README.md), which stacks deployed before the
description also ran the job with. Both become a FlowDescription."""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from mirrorstack.mm2.client_settings import Secret, jaas_login, resolve_reference
from mirrorstack.mm2.flows import FlowDescription, FlowSelection, ReplicationPolicy
from mirrorstack.mm2.validation_reports import REPORT_TOPIC

from .names import ALIAS, TOPIC
from .positions import Position, parse_positions
from .report_channel import ReportTo

EXIT_PASSED, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_ERROR = 0, 1, 2, 3
POLICIES = ("default", "identity")
DEFAULT_WAIT_SECONDS = 120
# in_flight's default: no more than the target takes in another wait at the rate it took
# records during this one (progress.py); null or "unlimited": no limit.
WAIT_RATE = "wait-rate"
DEFAULT_TOLERANCE: dict[str, int | str | None] = {
    "missing": 0, "duplicates": 0, "extras": 0, "out_of_order": 0, "in_flight": WAIT_RATE, "lost": 0, "purged": 0}
TOLERANCE_REPORT_KEYS = ("missing", "duplicates", "extras", "out_of_order", "in_flight", "purged")
FLOW_KEYS = {"name", "source_bootstrap", "target_bootstrap", "source_alias", "policy", "separator",
             "topics", "topic_patterns", "topics_exclude", "target_alias", "source_client", "target_client",
             "checkpoints_topic", "groups", "groups_exclude", "groups_required", "offset_syncs_topic", "positions"}
# The control plane's form: the flow's description and what only the job needs.
DESCRIBED_KEYS = {"flow", "source_bootstrap", "target_bootstrap", "source_client", "target_client", "groups_required",
                  "positions"}

TOP_KEYS = {"flows", "wait_seconds", "tolerance", "window_seconds", "min_records", "report_to"}
# Spark's Kafka source sets these itself and rejects them as options.
SPARK_OWNED_CLIENT_KEYS = {"key.deserializer", "value.deserializer", "auto.offset.reset",
                           "enable.auto.commit", "interceptor.classes", "key.serializer",
                           "value.serializer"}


class BadInput(Exception):
    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


def _log(message: str) -> None:
    print(f"validate_replication {time.strftime('%H:%M:%S')}: {message}", file=sys.stderr, flush=True)

@dataclass(frozen=True)
class FlowSpec:
    """One flow as the job checks it: its `description` (the topic patterns and
    excludes as its connectors apply them, policy, names), where its clusters
    are, and what the job checks of it: `topics` (names; those the patterns
    select once resolved), the checkpoints of `groups` (None: no failover check)."""
    index: int
    description: FlowDescription
    source_bootstrap: str
    target_bootstrap: str
    topics: tuple[str, ...]
    source_client: dict[str, str]
    target_client: dict[str, str]
    checkpoints_topic: str | None
    groups: tuple[str, ...] | None
    groups_required: bool = True
    # MM2's offset syncs of this flow, on the target (offset-syncs.topic.location=target)
    offset_syncs_topic: str | None = None
    # Where consumers would resume on the target, proved by identity (positions.py): a drill's group copies.
    positions: tuple[Position, ...] = ()

    @property
    def name(self) -> str:
        return self.description.name

    @property
    def source_alias(self) -> str | None:
        return self.description.source

    @property
    def target_alias(self) -> str | None:
        return self.description.target

    @property
    def policy(self) -> str:
        return self.description.replication_policy

    @property
    def separator(self) -> str:
        return self.description.separator

    @property
    def topic_patterns(self) -> tuple[str, ...]:
        return self.description.topics

    @property
    def topics_exclude(self) -> tuple[str, ...]:
        return self.description.topics_exclude

    @property
    def groups_exclude(self) -> tuple[str, ...]:
        return self.description.groups_exclude

    @property
    def selection(self) -> FlowSelection:
        """The flow's meaning (flows.py): its topic patterns and excludes, policy, names."""
        return self.description.selection()

    @property
    def mm2(self) -> ReplicationPolicy:
        return self.selection.mm2

    def selects(self, topic: str) -> bool:
        """Whether a source topic is one this flow's patterns replicate, as MM2
        decides (the never-replicated topics always apply, as mirrorstack's flows
        pass them; cycles are known only with a `target_alias`). Heartbeats are
        MM2's own records, not the users': never validated."""
        return self.selection.selects(topic) and not self.mm2.is_heartbeats_topic(topic)

    def remote_topic(self, topic: str) -> str:
        return self.selection.remote(topic)


# Source topics feeding one target topic in a run: reconcile packs a member's number in 8 bits.
MAX_MEMBERS = 256


@dataclass(frozen=True)
class Member:
    """One (flow, source topic) feeding a group; `src` numbers it within the group."""
    src: int
    flow: FlowSpec
    topic: str

    @property
    def label(self) -> str:
        return f"{self.flow.name}:{self.topic}"


@dataclass
class Group:
    target_bootstrap: str
    topic: str
    target_client: dict[str, str]
    members: list[Member] = field(default_factory=list)

    @property
    def reads_committed(self) -> bool:
        """A transactional target (exactly-once): its offsets include commit markers, not only records."""
        return (self.target_client or {}).get("isolation.level") == "read_committed"


@dataclass
class Config:
    flows: list[FlowSpec]
    groups: list[Group]
    wait_seconds: float
    tolerance: dict[str, int | None]
    # Only records with a timestamp in the last `window_seconds` (at the snapshot)
    # are checked, on both sides; None: the whole history the topics hold.
    window_seconds: float | None = None
    # Fewer records checked than this fails the run (0: a run that checked
    # nothing is reported as `nothing-checked`: not a pass, and not a failure).
    min_records: int = 0
    # Where the report also goes, as a record (report_channel.py); None: only --out and stdout.
    report_to: ReportTo | None = None

    @property
    def has_patterns(self) -> bool:
        return any(f.topic_patterns for f in self.flows)


def normalize_bootstrap(bootstrap: str) -> str:
    return ",".join(sorted(part.strip() for part in bootstrap.split(",") if part.strip()))


def _check_bootstrap(value: Any, where: str, problems: list[str]) -> str | None:
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}: required, a comma-separated host:port list")
        return None
    for entry in value.split(","):
        host, _, port = entry.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            problems.append(f"{where}: {entry.strip()!r} is not host:port")
            return None
    return value.strip()


def _check_client(value: Any, where: str, problems: list[str]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.append(f"{where}: must be an object of Kafka client settings")
        return {}
    out = {}
    for key, setting in value.items():
        if key in SPARK_OWNED_CLIENT_KEYS or key == "bootstrap.servers":
            problems.append(f"{where}.{key}: not allowed (the job sets it)")
        elif isinstance(setting, bool):
            out[key] = "true" if setting else "false"
        elif isinstance(setting, (str, int, float)):
            out[key] = resolve_reference(str(setting), f"{where}.{key}", problems)
        else:
            problems.append(f"{where}.{key}: must be a string")
    return out


def _non_negative_int(value: Any, where: str, problems: list[str], allow_null: bool) -> int | None:
    # "unlimited" says null where nulls do not survive (Pulumi drops them from inputs)
    if (value is None or value == "unlimited") and allow_null:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        alternatives = ' or null or "unlimited"' if allow_null else ""
        problems.append(f"{where}: must be a non-negative integer{alternatives}")
        return 0
    return value


def parse_flow(i: int, raw: Any, problems: list[str]) -> FlowSpec | None:
    where = f"flows[{i}]"
    if not isinstance(raw, dict):
        problems.append(f"{where}: must be an object")
        return None
    if "flow" in raw:
        return _described_flow(i, raw, problems)
    return _flat_description(i, raw, problems)


def _described_flow(i: int, raw: dict, problems: list[str]) -> FlowSpec | None:
    """The control plane's form: the flow's description, its clusters' addresses and clients."""
    where = f"flows[{i}]"
    before = len(problems)
    for key in sorted(set(raw) - DESCRIBED_KEYS):
        problems.append(f"{where}.{key}: unknown field (known: {', '.join(sorted(DESCRIBED_KEYS))})")
    try:
        flow = FlowDescription.from_dict(raw["flow"])
    except (ValueError, TypeError) as exc:
        problems.append(f"{where}.flow: {exc}")
        return None
    if flow.replication_policy not in POLICIES:
        problems.append(f"{where}.flow.replication_policy: {flow.replication_policy!r} is not one of "
                        f"{', '.join(POLICIES)}")
    if not flow.separator:
        problems.append(f"{where}.flow.separator: must be a non-empty string")
    for side in ("source", "target"):
        if not isinstance(getattr(flow, side), str) or not ALIAS.fullmatch(getattr(flow, side)):
            problems.append(f"{where}.flow.{side}: must be a cluster alias like 'us' ([A-Za-z0-9._-]+)")
    for key in ("topics", "topics_exclude", "groups", "groups_exclude"):
        if getattr(flow, key) or key == "topics":
            _regex_list(list(getattr(flow, key)), f"{where}.flow.{key}", problems)
    source = _check_bootstrap(raw.get("source_bootstrap"), f"{where}.source_bootstrap", problems)
    target = _check_bootstrap(raw.get("target_bootstrap"), f"{where}.target_bootstrap", problems)
    source_client = _check_client(raw.get("source_client"), f"{where}.source_client", problems)
    target_client = _check_client(raw.get("target_client"), f"{where}.target_client", problems)
    groups_required = raw.get("groups_required", True)
    if not isinstance(groups_required, bool):
        problems.append(f"{where}.groups_required: must be true or false")
    positions = parse_positions(raw.get("positions"), f"{where}.positions", problems)
    if len(problems) > before:
        return None
    # Checked as its connectors run it: with what no flow replicates (the connectors' excludes).
    selection = flow.selection()
    checked = dataclasses.replace(flow, topics_exclude=selection.all_topics_exclude,
                                  groups_exclude=selection.all_groups_exclude)
    return FlowSpec(i, checked, source, target, (), source_client, target_client,
                    flow.checkpoints_topic() if flow.checkpoints else None,
                    flow.groups if flow.checkpoints else None, groups_required, flow.offset_syncs_topic(), positions)


def _flat_description(i: int, raw: dict, problems: list[str]) -> FlowSpec | None:
    """The flat form, written by hand (spark/README.md) or by a stack deployed
    before the control plane sent descriptions: its fields, one by one."""
    where = f"flows[{i}]"
    before = len(problems)
    for key in sorted(set(raw) - FLOW_KEYS):
        problems.append(f"{where}.{key}: unknown field (known: {', '.join(sorted(FLOW_KEYS))})")
    name = raw.get("name", where)
    if not isinstance(name, str) or not name:
        problems.append(f"{where}.name: must be a non-empty string")
    source = _check_bootstrap(raw.get("source_bootstrap"), f"{where}.source_bootstrap", problems)
    target = _check_bootstrap(raw.get("target_bootstrap"), f"{where}.target_bootstrap", problems)
    policy = raw.get("policy", "default")
    if policy not in POLICIES:
        problems.append(f"{where}.policy: {policy!r} is not one of {', '.join(POLICIES)}")
    separator = raw.get("separator", ".")
    if not isinstance(separator, str) or not separator:
        problems.append(f"{where}.separator: must be a non-empty string")
    alias = raw.get("source_alias")
    if alias is None:
        if policy == "default":
            problems.append(f"{where}.source_alias: required with policy default (it prefixes remote topics)")
    elif not isinstance(alias, str) or not ALIAS.fullmatch(alias):
        problems.append(f"{where}.source_alias: must be a cluster alias like 'us' ([A-Za-z0-9._-]+)")
    topics, patterns = raw.get("topics"), raw.get("topic_patterns")
    patterns = _regex_list(patterns, f"{where}.topic_patterns", problems) if patterns is not None else []
    excludes = raw.get("topics_exclude")
    excludes = _regex_list(excludes, f"{where}.topics_exclude", problems) if excludes is not None else []
    if patterns and topics is not None:
        problems.append(f"{where}.topics: give topics or topic_patterns, not both")
    if patterns:
        topics = []
    elif not isinstance(topics, list) or not topics:
        problems.append(f"{where}.topics: required (or topic_patterns), a non-empty list of topic names")
        topics = []
    elif excludes:
        problems.append(f"{where}.topics_exclude: only with topic_patterns")
    target_alias = raw.get("target_alias")
    if target_alias is not None and (not isinstance(target_alias, str) or not ALIAS.fullmatch(target_alias)):
        problems.append(f"{where}.target_alias: must be a cluster alias like 'central' ([A-Za-z0-9._-]+)")
    for j, topic in enumerate(topics):
        if not isinstance(topic, str) or not TOPIC.fullmatch(topic):
            problems.append(f"{where}.topics[{j}]: {topic!r} is not a Kafka topic name")
    if len(set(map(str, topics))) != len(topics):
        problems.append(f"{where}.topics: lists a topic twice")
    source_client = _check_client(raw.get("source_client"), f"{where}.source_client", problems)
    target_client = _check_client(raw.get("target_client"), f"{where}.target_client", problems)
    checkpoints = raw.get("checkpoints_topic")
    if checkpoints is not None and (not isinstance(checkpoints, str) or not TOPIC.fullmatch(checkpoints)):
        problems.append(f"{where}.checkpoints_topic: {checkpoints!r} is not a Kafka topic name")
    syncs = raw.get("offset_syncs_topic")
    if syncs is not None and (not isinstance(syncs, str) or not TOPIC.fullmatch(syncs)):
        problems.append(f"{where}.offset_syncs_topic: {syncs!r} is not a Kafka topic name")
    groups = raw.get("groups")
    groups_exclude = raw.get("groups_exclude")
    if groups_exclude is not None:
        groups_exclude = _regex_list(groups_exclude, f"{where}.groups_exclude", problems)
    groups_required = raw.get("groups_required", True)
    if not isinstance(groups_required, bool):
        problems.append(f"{where}.groups_required: must be true or false")
    if groups is not None:
        groups = _regex_list(groups, f"{where}.groups", problems)
        if checkpoints is None:
            problems.append(f"{where}.groups: needs checkpoints_topic (failover is checked from checkpoints)")
    positions = parse_positions(raw.get("positions"), f"{where}.positions", problems)
    if len(problems) > before:
        return None
    description = FlowDescription(name=name, source=alias, target=target_alias, topics=tuple(patterns),
                                  topics_exclude=tuple(excludes), groups=tuple(groups or ()),
                                  groups_exclude=tuple(groups_exclude or ()), replication_policy=policy,
                                  separator=separator, checkpoints=checkpoints is not None)
    return FlowSpec(i, description, source, target, tuple(topics), source_client, target_client, checkpoints,
                    tuple(groups) if groups is not None else None, groups_required is not False, syncs, positions)


def _regex_list(value: Any, where: str, problems: list[str]) -> list[str]:
    if not isinstance(value, list) or not value:
        problems.append(f"{where}: must be a non-empty list of regexes")
        return []
    for j, regex in enumerate(value):
        try:
            if not isinstance(regex, str) or not regex:
                raise re.error("not a non-empty string")
            re.compile(regex)
        except re.error:
            problems.append(f"{where}[{j}]: {regex!r} is not a regex")
    return value


def resolve_topics(config: Config, list_topics: Callable[[str, dict[str, str]], dict[str, int]],
                   log: Callable[[str], None] = _log) -> Config:
    """Replace each flow's topic_patterns by the non-empty source topics they
    select; list_topics(bootstrap, client) -> {topic: records}."""
    if not config.has_patterns:
        return config
    flows, seen = [], {}
    for flow in config.flows:
        if flow.topic_patterns:
            key = json.dumps([normalize_bootstrap(flow.source_bootstrap), flow.source_client], sort_keys=True)
            if key not in seen:
                seen[key] = list_topics(flow.source_bootstrap, flow.source_client)
            chosen = sorted(t for t, n in seen[key].items() if n > 0 and flow.selects(t))
            log(f"{flow.name}: topic patterns select {len(chosen)} topic(s) with records: "
                f"{', '.join(chosen) or 'none'}")
            flow = dataclasses.replace(flow, topics=tuple(chosen))
        flows.append(flow)
    problems: list[str] = []
    groups = group_flows(flows, problems)
    if problems:
        raise BadInput(problems)
    return dataclasses.replace(config, flows=flows, groups=groups)


def group_flows(flows: list[FlowSpec], problems: list[str]) -> list[Group]:
    """Flows landing in the same (target cluster, remote topic) validate as one group."""
    groups: dict[tuple[str, str], Group] = {}
    origin: dict[tuple[str, str], int] = {}
    for flow in flows:
        for j, topic in enumerate(flow.topics):
            key = (normalize_bootstrap(flow.target_bootstrap), flow.remote_topic(topic))
            group = groups.get(key)
            if group is None:
                group = groups[key] = Group(flow.target_bootstrap, key[1], flow.target_client)
                origin[key] = flow.index
            elif group.target_client != flow.target_client:
                problems.append(f"flows[{flow.index}].target_client: differs from flows[{origin[key]}]."
                                f"target_client, which writes to the same target topic {key[1]!r}")
            for other in group.members:
                if (normalize_bootstrap(other.flow.source_bootstrap) == normalize_bootstrap(flow.source_bootstrap)
                        and other.topic == topic):
                    problems.append(f"flows[{flow.index}].topics[{j}]: {topic!r} from the same source already "
                                    f"feeds {key[1]!r} (flows[{other.flow.index}])")
            if len(group.members) == MAX_MEMBERS:
                problems.append(f"flows[{flow.index}].topics[{j}]: {topic!r} is one source topic too many for "
                                f"{key[1]!r}: one run checks at most {MAX_MEMBERS} feeding a target topic; fix: "
                                "validate the flows into it in separate runs")
                continue
            group.members.append(Member(len(group.members), flow, topic))
    return list(groups.values())


def parse_config(data: Any, wait_override: float | None = None) -> Config:
    problems: list[str] = []
    if not isinstance(data, dict):
        raise BadInput(["config: must be a JSON object with a `flows` list"])
    for key in sorted(set(data) - TOP_KEYS):
        problems.append(f"{key}: unknown field (known: {', '.join(sorted(TOP_KEYS))})")
    raw_flows = data.get("flows")
    if not isinstance(raw_flows, list) or not raw_flows:
        problems.append("flows: required, a non-empty list")
        raw_flows = []
    flows = [f for f in (parse_flow(i, raw, problems) for i, raw in enumerate(raw_flows)) if f]
    names = [f.name for f in flows]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"flows[*].name: {dup!r} is used by more than one flow")
    wait = data.get("wait_seconds", DEFAULT_WAIT_SECONDS) if wait_override is None else wait_override
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or wait < 0:
        problems.append("wait_seconds: must be a non-negative number")
        wait = 0
    tolerance = dict(DEFAULT_TOLERANCE)
    raw_tol = data.get("tolerance", {})
    if not isinstance(raw_tol, dict):
        problems.append("tolerance: must be an object")
        raw_tol = {}
    for key, value in raw_tol.items():
        if key not in DEFAULT_TOLERANCE:
            problems.append(f"tolerance.{key}: unknown (known: {', '.join(DEFAULT_TOLERANCE)})")
            continue
        if key == "in_flight" and value == WAIT_RATE:
            tolerance[key] = WAIT_RATE
            continue
        tolerance[key] = _non_negative_int(value, f"tolerance.{key}", problems, allow_null=True)
    window = data.get("window_seconds")
    if window is not None and (isinstance(window, bool) or not isinstance(window, (int, float)) or window <= 0):
        problems.append("window_seconds: must be a positive number of seconds, or null for the whole history")
        window = None
    min_records = _non_negative_int(data.get("min_records", 0), "min_records", problems, allow_null=False) or 0
    report_to = _report_to(data.get("report_to"), problems)
    groups = group_flows(flows, problems) if not problems else []
    if problems:
        raise BadInput(problems)
    return Config(flows, groups, float(wait), tolerance,
                  None if window is None else float(window), min_records, report_to)


def _report_to(raw: Any, problems: list[str]) -> ReportTo | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        problems.append("report_to: must be an object with `bootstrap` (and `client`, `topic`)")
        return None
    for key in sorted(set(raw) - {"bootstrap", "client", "topic"}):
        problems.append(f"report_to.{key}: unknown field (known: bootstrap, client, topic)")
    bootstrap = _check_bootstrap(raw.get("bootstrap"), "report_to.bootstrap", problems)
    client = _check_client(raw.get("client"), "report_to.client", problems)
    topic = raw.get("topic", REPORT_TOPIC)
    if not isinstance(topic, str) or not TOPIC.fullmatch(topic):
        problems.append(f"report_to.topic: {topic!r} is not a Kafka topic name")
        return None
    return ReportTo(bootstrap, client, topic) if bootstrap else None


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """The options load_config reads."""
    parser.add_argument("--config", metavar="FILE", help="JSON file with `flows` (spark/README.md)")
    parser.add_argument("--config-json", metavar="TEXT", help="the same JSON inline, instead of --config")


def load_config(args: argparse.Namespace) -> Config:
    if bool(args.config) == bool(args.config_json):
        raise BadInput(["--config / --config-json: give exactly one"])
    if args.config:
        try:
            text = Path(args.config).read_text()
        except OSError as exc:
            raise BadInput([f"--config: cannot read {args.config}: {exc.strerror}"]) from exc
        source = args.config
    else:
        text, source = args.config_json, "--config-json"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput([f"{source}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"]) from exc
    return parse_config(data, args.wait_seconds)


def hide_secrets(text: str, flows) -> str:
    """`text` (an error from Kafka or Spark) without the values the flows' clients read through
    `${file:...}` references, nor a JAAS password among them."""
    secrets = {value for flow in flows for client in (flow.source_client, flow.target_client)
               for value in client.values() if isinstance(value, Secret)}
    secrets |= {login[1] for login in map(jaas_login, list(secrets)) if login}
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        text = text.replace(secret, "<hidden>")
    return text
