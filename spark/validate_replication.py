#!/usr/bin/env python3
"""Validate MirrorMaker 2 replication end to end with PySpark: completeness,
duplicates, extras, per-partition order, topic mapping, lag, and what a
consumer group would lose or re-read when failing over at MM2's translated
offsets.

Standalone: needs only pyspark (and the spark-sql-kafka jars) plus, optionally,
confluent_kafka on the driver. It imports nothing of mirrorstack except, when
run from the project with no `--jars`, `components.toolchain.spark_kafka_jars()`
for the default jar list.

    python spark/validate_replication.py --config flows.json --out report.json
    spark-submit --jars <spark-sql-kafka jars> spark/validate_replication.py --config flows.json

Input (`--config FILE` or `--config-json TEXT`)
-----------------------------------------------
    {"flows": [{"name": "us->central",              # optional, default flows[i]
                "source_bootstrap": "host:port,...",  # required
                "target_bootstrap": "host:port,...",  # required
                "source_alias": "us",                 # required for policy default
                "policy": "default" | "identity",     # default "default"
                "separator": ".",                     # default "."
                "topics": ["orders"],                 # exact source topic names, or:
                "topic_patterns": ["orders", "clicks.*"],  # regexes (MM2's `topics`), resolved
                "topics_exclude": ["tmp\\..*"],        #   against the source's topics at start
                "target_alias": "central",            # optional: skips topics named for the target
                "source_client": {"security.protocol": "SSL", ...},  # Kafka client settings
                "target_client": {...},
                "checkpoints_topic": "us.checkpoints.internal",      # optional, on the target
                "groups": ["app-.*"],                 # optional consumer-group regexes
                "groups_exclude": ["tmp-.*"],         # optional, groups to leave out
                "groups_required": true}],            # default true: a regex with no checkpoint fails
     "wait_seconds": 120,
     "tolerance": {"missing": 0, "duplicates": 0, "extras": 0, "out_of_order": 0,
                   "in_flight": null, "lost": 0}}

Client settings are Java Kafka client properties; they are passed to Spark's
Kafka source as `kafka.<key>` options (and, translated, to confluent_kafka when
that reads offsets on the driver: PEM trust/key stores and a SCRAM or PLAIN
`sasl.jaas.config` translate, other Java-only settings send offsets via Spark).
A value that is exactly `${file:/abs/path:key}` (Kafka's FileConfigProvider
reference) is replaced, when the config is read, by `key` of that Java
properties file; the value read never appears in messages or the report.
Tolerances are maxima; null means no limit.
Defaults: missing, duplicates, extras, out_of_order and lost 0; in_flight null.

Method
------
0. Topic patterns: a flow with `topic_patterns` validates every source topic
   that fully matches one of them and none of `topics_exclude`, leaving out
   what MM2 never replicates (`__*`, `*.internal`, `*-internal`, `*.replica`,
   `heartbeats` topics) and, with the default policy and a `target_alias`,
   topics already named after the target (MM2's cycle check). Empty topics are
   left out too (nothing to check yet); a flow matching no topic is reported,
   not failed.
1. Snapshot: the end offset of every source partition is taken once, at start
   (confluent_kafka watermarks, or in `--offsets-via spark` mode an aggregate
   max(offset)+1 per partition); the window is [beginning, snapshot end).
2. Remote topic: default policy `<alias><separator><topic>`, identity `<topic>`.
   Flows landing in the same (target bootstrap, remote topic) form ONE group,
   validated together (identity aggregation: us.orders and uk.orders into
   central's `orders`).
3. Wait, bounded by wait_seconds with progress on stderr, until each target
   topic holds at least as many records as its sources' windows; then read the
   target fully (earliest to latest).
4. Records are matched on (partition, timestamp, sha256(key), sha256(value),
   sha256 of headers) — never on offsets — with multiplicity: occurrences of a
   match key are numbered (row_number by offset) on both sides and the two
   sides are full-outer joined on (match key, occurrence). Only aggregates and
   samples of at most --sample-size rows reach the driver. Reads split Kafka
   partitions and shuffles use one task per ~400,000 rows, and the frames used
   twice are cached on disk, so the heap needed does not grow with the data.
   - missing: source records in the window without a target partner; those
     after the last matched source offset of their partition count as
     in_flight instead when the wait bound expired (so a partition with no
     match at all is entirely in_flight then: set tolerance.in_flight to make
     a stalled flow fail);
   - duplicates: target occurrences beyond the source multiplicity of a key;
   - extras: target records whose key no source record has;
   - out_of_order: per target partition, over matched pairs in target-offset
     order, pairs whose source offset is lower than the previous pair's (per
     source: identity merges interleave sources legitimately);
   - partitions_ok: the remote topic exists with each source's partition count;
   - lag: per source partition, records in the window minus those matched.
5. Failover (flows with `checkpoints_topic`): MM2 Checkpoint records are read
   from the target and decoded (key: int16-length group, int16-length topic,
   int32 partition; value: int16 version 0, int64 upstream offset, int64
   downstream offset, int16-length metadata — Kafka's
   org.apache.kafka.connect.mirror.Checkpoint, big-endian). With the latest
   checkpoint per (group, topic, partition), a consumer resuming at the
   downstream offset D with upstream offset U would LOSE the records whose
   target partner lies before D but whose source offset is >= U, and RE-READ
   those at/after D whose source offset is < U.

Report (`--out FILE`, JSON)
---------------------------
    {"passed": bool, "exit_code": 0|1, "failures": [str],   # why it failed
     "started_at": ISO-8601, "duration_seconds": float,
     "offsets_via": "kafka-client" | "spark", "wait_seconds": float, "tolerance": {...},
     "groups": [{                                     # one per (target, remote topic)
        "target_bootstrap": str, "topic": str,        # the remote topic
        "flows": [str],                               # flow names feeding it
        "sources": [{"flow", "topic", "source_bootstrap", "partitions",
                     "window": {"<partition>": [begin, end]}}],
        "target_partitions": int | null,              # null: topic does not exist
        "partitions_ok": bool,
        "waited_seconds": float, "timed_out": bool,
        "source_records": int, "target_records": int,
        "matched": int, "missing": int, "in_flight": int,
        "duplicates": int, "extras": int, "out_of_order": int,
        "samples": {"missing" | "in_flight": [{"flow", "topic", "partition", "source_offset",
                                               "target_offset": null}],
                    "duplicates": [{"topic", "partition", "source_offset", "target_offset"}],
                    "extras": [{"topic", "partition", "source_offset": null, "target_offset"}],
                    "out_of_order": [{"flow", "topic", "partition", "source_offset",
                                      "previous_source_offset", "target_offset"}]},
        "lag": [{"flow", "topic", "partition", "expected", "matched", "lag"}],
        "failover": [{"flow", "consumer_group", "topic", "checkpoints_topic", "partitions",
                      "lost", "reread",
                      "checkpoints": [{"partition", "upstream_offset", "downstream_offset"}]}],
        "passed": bool, "failures": [str]}],
     "flows": [{"name", "topics": [{"topic", "remote_topic", "group",   # index into groups
                                    "source_records", "matched", "missing", "in_flight",
                                    "duplicates", "out_of_order"}]}]}

A human summary goes to stdout, progress to stderr.

Pass/fail and exit codes
------------------------
A group fails when missing, duplicates, extras, out_of_order, in_flight (only
if given a limit) or any consumer group's `lost` exceeds its tolerance, when
partitions_ok is false, or when a `groups` regex matched no checkpoint.
Exit 0: passed; 1: failed (the report says why); 2: bad input (each message
names the field); 3: the job could not run (Kafka unreachable, Spark error).

Limits: matching needs CreateTime timestamps preserved (MM2 does); on topics
with LogAppendTime every record would be missing + extra. In `--offsets-via
spark` mode partition counts are the partitions that hold records (empty
partitions are invisible to Spark's Kafka source) and the snapshot reads the
topic once more.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import re
import struct
import sys
import time
import uuid
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any, Callable

EXIT_PASSED, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_ERROR = 0, 1, 2, 3
POLICIES = ("default", "identity")
DEFAULT_WAIT_SECONDS = 120
DEFAULT_TOLERANCE: dict[str, int | None] = {
    "missing": 0, "duplicates": 0, "extras": 0, "out_of_order": 0, "in_flight": None, "lost": 0}
TOLERANCE_REPORT_KEYS = ("missing", "duplicates", "extras", "out_of_order", "in_flight")
FLOW_KEYS = {"name", "source_bootstrap", "target_bootstrap", "source_alias", "policy", "separator",
             "topics", "topic_patterns", "topics_exclude", "target_alias", "source_client", "target_client",
             "checkpoints_topic", "groups", "groups_exclude", "groups_required"}
WATERMARK_ATTEMPTS = 10  # about 10 s for a just-created topic's leader to be known

# Topics MM2 does not replicate whatever the patterns say (its DefaultTopicFilter
# plus internal and heartbeat topics), so a pattern like ".*" never picks them.
NEVER_REPLICATED = re.compile(r"__.*|.*[-.]internal|.*\.replica|(.*\.)?heartbeats")
TOP_KEYS = {"flows", "wait_seconds", "tolerance"}
# Spark's Kafka source sets these itself and rejects them as options.
SPARK_OWNED_CLIENT_KEYS = {"key.deserializer", "value.deserializer", "auto.offset.reset",
                           "enable.auto.commit", "interceptor.classes", "key.serializer",
                           "value.serializer"}
# Java client settings librdkafka has no equivalent for (driver offsets then go via Spark).
JAVA_ONLY_CLIENT_KEYS = ("sasl.jaas.config", "ssl.truststore.", "ssl.keystore.", "sasl.login.",
                         "sasl.client.callback.handler.class", "ssl.endpoint.identification.algorithm")
# Rows per Spark task, for reads (Kafka partitions split) and shuffles: keeps each
# task's sort and window buffers small, so the heap needed does not grow with N.
ROWS_PER_TASK = 400_000
# `${file:PATH:KEY}`, split as Kafka's ConfigTransformer does (PATH up to the first colon).
FILE_REFERENCE = re.compile(r"\$\{file:([^}:]*):([^}]*)\}")
PROPERTIES_ESCAPE = re.compile(r"\\(u[0-9A-Fa-f]{4}|.?)", re.S)
JAAS_LOGIN = re.compile(r"\s*org\.apache\.kafka\.common\.security\.(?:scram\.ScramLoginModule|plain\.PlainLoginModule)"
                        r"\s+(?i:required|requisite|sufficient|optional)\b(.*?);?\s*", re.S)
JAAS_OPTION = re.compile(r'\s*([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";=]+))', re.S)
ALIAS = re.compile(r"[A-Za-z0-9._-]+")
TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


class BadInput(Exception):
    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


class Secret(str):
    """A client setting read through a `${file:...}` reference: hidden in reprs
    (so in any dataclass, dict or problem that shows one)."""

    def __repr__(self) -> str:
        return "'<hidden>'"


def _log(message: str) -> None:
    print(f"validate_replication {time.strftime('%H:%M:%S')}: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the input

@dataclass(frozen=True)
class FlowSpec:
    index: int
    name: str
    source_bootstrap: str
    target_bootstrap: str
    source_alias: str | None
    policy: str
    separator: str
    topics: tuple[str, ...]
    source_client: dict[str, str]
    target_client: dict[str, str]
    checkpoints_topic: str | None
    groups: tuple[str, ...] | None
    topic_patterns: tuple[str, ...] = ()
    topics_exclude: tuple[str, ...] = ()
    target_alias: str | None = None
    groups_exclude: tuple[str, ...] = ()
    groups_required: bool = True

    def selects(self, topic: str) -> bool:
        """Whether a source topic is one this flow's patterns replicate."""
        if NEVER_REPLICATED.fullmatch(topic):
            return False
        if not any(re.fullmatch(p, topic) for p in self.topic_patterns):
            return False
        if any(re.fullmatch(p, topic) for p in self.topics_exclude):
            return False
        # The default policy never sends a topic back to the cluster it came from.
        return not (self.policy == "default" and self.target_alias
                    and topic.startswith(f"{self.target_alias}{self.separator}"))

    def remote_topic(self, topic: str) -> str:
        return remote_topic(self.policy, self.source_alias, self.separator, topic)


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


@dataclass
class Config:
    flows: list[FlowSpec]
    groups: list[Group]
    wait_seconds: float
    tolerance: dict[str, int | None]

    @property
    def has_patterns(self) -> bool:
        return any(f.topic_patterns for f in self.flows)


def remote_topic(policy: str, alias: str | None, separator: str, topic: str) -> str:
    """MM2's remote topic name: DefaultReplicationPolicy prefixes the source alias,
    IdentityReplicationPolicy keeps the name."""
    if policy == "identity":
        return topic
    return f"{alias}{separator}{topic}"


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


def resolve_reference(value: str, where: str, problems: list[str]) -> str:
    """The value of a `${file:PATH:KEY}` reference, read as Kafka's
    FileConfigProvider does; any other value as it is. Problems name the file
    and key, never what the file holds."""
    ref = FILE_REFERENCE.fullmatch(value)
    if ref is None:
        if "${file:" in value:
            problems.append(f"{where}: a ${{file:PATH:KEY}} reference must be the whole value")
        return value
    path, key = ref.groups()
    if not os.path.isabs(path):
        problems.append(f"{where}: {path!r} in the ${{file:...}} reference is not an absolute path")
        return value
    try:
        props = read_properties(path)
    except OSError as exc:
        problems.append(f"{where}: cannot read {path} ({exc.strerror or type(exc).__name__})")
        return value
    except ValueError:  # not UTF-8, or a malformed \uXXXX: the text itself is never shown
        problems.append(f"{where}: {path} is not a valid Java properties file")
        return value
    if key not in props:
        problems.append(f"{where}: {path} has no key {key!r}")
        return value
    return Secret(props[key])


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file as java.util.Properties.load reads it: `key=value`,
    `key: value` or `key value`; `#`/`!` comment lines; backslash escapes
    (`\\t`, `\\n`, `\\uXXXX`, `\\=`, ...); a line ending in an odd number of
    backslashes continues on the next, whose leading blanks are dropped."""
    props: dict[str, str] = {}
    logical, continued = "", False
    for line in re.split(r"\r\n|\r|\n", Path(path).read_text(encoding="utf-8")):
        line = line.lstrip(" \t\f")
        if not continued and (not line or line[0] in "#!"):
            continue
        continued = (len(line) - len(line.rstrip("\\"))) % 2 == 1
        logical += line[:-1] if continued else line
        if not continued:
            _add_property(props, logical)
            logical = ""
    if continued:  # a backslash on the last line continues nothing
        _add_property(props, logical)
    return props


def _add_property(props: dict[str, str], line: str) -> None:
    end = 0  # the key ends at the first unescaped `=`, `:` or blank
    while end < len(line) and line[end] not in "=: \t\f":
        end += 2 if line[end] == "\\" else 1
    value = line[end:].lstrip(" \t\f")
    if value[:1] in ("=", ":"):
        value = value[1:].lstrip(" \t\f")
    props[_unescape(line[:end])] = _unescape(value)


def _unescape(text: str) -> str:
    def one(match: re.Match) -> str:
        escaped = match.group(1)
        if escaped == "u":
            raise ValueError("malformed \\uXXXX escape")
        if len(escaped) == 5:
            return chr(int(escaped[1:], 16))
        return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(escaped, escaped)
    # \\uXXXX are UTF-16 units: join surrogate pairs into one character
    return PROPERTIES_ESCAPE.sub(one, text).encode("utf-16", "surrogatepass").decode("utf-16")


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
    if len(problems) > before:
        return None
    return FlowSpec(i, name, source, target, alias, policy, separator, tuple(topics), source_client,
                    target_client, checkpoints, tuple(groups) if groups is not None else None,
                    tuple(patterns), tuple(excludes), target_alias, tuple(groups_exclude or ()),
                    groups_required is not False)


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
    return Config(flows, groups, config.wait_seconds, config.tolerance)


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
        tolerance[key] = _non_negative_int(value, f"tolerance.{key}", problems, allow_null=True)
    groups = group_flows(flows, problems) if not problems else []
    if problems:
        raise BadInput(problems)
    return Config(flows, groups, float(wait), tolerance)


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


# ------------------------------------------------------- MM2 checkpoint format

def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", buf, pos)
    if length < 0 or pos + 2 + length > len(buf):
        raise ValueError(f"bad string length {length} at {pos}")
    return buf[pos + 2:pos + 2 + length].decode("utf-8"), pos + 2 + length


def decode_checkpoint_key(key: bytes) -> tuple[str, str, int]:
    """(group, topic, partition) of a Checkpoint record key (Kafka's Type
    serialization: int16-length UTF-8 strings, int32, big-endian)."""
    group, pos = _read_string(key, 0)
    topic, pos = _read_string(key, pos)
    (partition,) = struct.unpack_from(">i", key, pos)
    return group, topic, partition


def decode_checkpoint_value(value: bytes) -> tuple[int, int, str]:
    """(upstream offset, downstream offset, metadata) of a Checkpoint value:
    an int16 version header (0), then int64, int64, int16-length string."""
    (version,) = struct.unpack_from(">h", value, 0)
    if version != 0:
        raise ValueError(f"unknown Checkpoint version {version}")
    upstream, downstream = struct.unpack_from(">qq", value, 2)
    metadata, _ = _read_string(value, 18)
    return upstream, downstream, metadata


def encode_checkpoint(group: str, topic: str, partition: int, upstream: int, downstream: int,
                      metadata: str = "") -> tuple[bytes, bytes]:
    """The inverse of the two decoders (for tests and tooling)."""
    def s(text: str) -> bytes:
        raw = text.encode("utf-8")
        return struct.pack(">h", len(raw)) + raw
    return (s(group) + s(topic) + struct.pack(">i", partition),
            struct.pack(">hqq", 0, upstream, downstream) + s(metadata))


# Spark SQL doing the same as the two decoders, on executors (1-based substring).
CHECKPOINT_SQL = [
    ["key", "value", "partition AS cp_partition", "offset AS cp_offset",
     "cast(conv(hex(substring(key, 1, 2)), 16, 10) AS int) AS glen"],
    ["*", "decode(substring(key, 3, glen), 'UTF-8') AS group",
     "cast(conv(hex(substring(key, 3 + glen, 2)), 16, 10) AS int) AS tlen"],
    ["*", "decode(substring(key, 5 + glen, tlen), 'UTF-8') AS topic",
     "cast(conv(hex(substring(key, 5 + glen + tlen, 4)), 16, -10) AS int) AS partition",
     "cast(conv(hex(substring(value, 1, 2)), 16, -10) AS int) AS version",
     "cast(conv(hex(substring(value, 3, 8)), 16, -10) AS bigint) AS upstream_offset",
     "cast(conv(hex(substring(value, 11, 8)), 16, -10) AS bigint) AS downstream_offset"],
]


# -------------------------------------------------------------- pass / fail

def group_failures(group: dict, tolerance: dict[str, int | None]) -> list[str]:
    label = f"{group['topic']} on {group['target_bootstrap']}"
    failures = []
    if not group["partitions_ok"]:
        if group["target_partitions"] is None:
            failures.append(f"{label}: the remote topic does not exist")
        else:
            counts = ", ".join(f"{s['flow']}:{s['topic']} has {s['partitions']}" for s in group["sources"])
            failures.append(f"{label}: {group['target_partitions']} partitions, but {counts}")
    for key in TOLERANCE_REPORT_KEYS:
        limit = tolerance.get(key)
        if limit is not None and group[key] > limit:
            failures.append(f"{label}: {key} {group[key]} > tolerance {limit}")
    lost_limit = tolerance.get("lost")
    for entry in group.get("failover", []):
        if entry.get("unmatched_regex"):
            failures.append(f"{label}: consumer groups {entry['consumer_group']!r} of {entry['flow']} have no "
                            f"checkpoint in {entry['checkpoints_topic']}")
        elif lost_limit is not None and entry["lost"] > lost_limit:
            failures.append(f"{label}: consumer group {entry['consumer_group']} would lose {entry['lost']} "
                            f"records failing over (> tolerance {lost_limit})")
    return failures


def summary_text(report: dict) -> str:
    lines = [f"replication check {'PASSED' if report['passed'] else 'FAILED'}: "
             f"{len(report['groups'])} target topic(s), {report['duration_seconds']:.1f}s"]
    for g in report["groups"]:
        feeds = ", ".join(f"{s['flow']}:{s['topic']}" for s in g["sources"])
        lines.append(f"  {g['topic']} on {g['target_bootstrap']} <- {feeds}")
        lines.append(f"    source {g['source_records']}  target {g['target_records']}  matched {g['matched']}  "
                     f"missing {g['missing']}  in-flight {g['in_flight']}  duplicates {g['duplicates']}  "
                     f"extras {g['extras']}  out-of-order {g['out_of_order']}  "
                     f"partitions {'ok' if g['partitions_ok'] else 'WRONG'}"
                     f"{'  (wait bound expired)' if g['timed_out'] else ''}")
        for f in g["failover"]:
            if f.get("unmatched_regex"):
                lines.append(f"    failover {f['consumer_group']}: no checkpoint")
            else:
                lines.append(f"    failover {f['consumer_group']} ({f['flow']}): lost {f['lost']}, "
                             f"re-read {f['reread']} over {f['partitions']} partition(s)")
        for name in ("missing", "in_flight", "duplicates", "extras", "out_of_order"):
            if g["samples"].get(name):
                lines.append(f"    {name} e.g. {json.dumps(g['samples'][name][:3])}")
        lines.extend(f"    FAIL {failure}" for failure in g["failures"])
    return "\n".join(lines)


# ------------------------------------------------------- offsets on the driver

def librdkafka_config(bootstrap: str, client: dict[str, str]) -> dict[str, Any] | None:
    """confluent_kafka settings for a Java client config, or None when a setting
    has no librdkafka equivalent. Translated: PEM trust and key stores (the PEM
    keystore file holds the key and the certificate chain) and a SCRAM or PLAIN
    JAAS login."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap}
    java = {key: value for key, value in client.items() if key.startswith(JAVA_ONLY_CLIENT_KEYS)}
    for key, value in client.items():
        if key not in java:
            conf["sasl.mechanisms" if key == "sasl.mechanism" else key] = value
    if java.get("ssl.truststore.type") == "PEM" and "ssl.truststore.location" in java:
        del java["ssl.truststore.type"]
        conf["ssl.ca.location"] = java.pop("ssl.truststore.location")
    if java.get("ssl.keystore.type") == "PEM" and "ssl.keystore.location" in java:
        del java["ssl.keystore.type"]
        conf["ssl.key.location"] = conf["ssl.certificate.location"] = java.pop("ssl.keystore.location")
    if "sasl.jaas.config" in java:
        login = jaas_login(java.pop("sasl.jaas.config"))
        if login is None:
            return None
        conf["sasl.username"], conf["sasl.password"] = login
    return None if java else conf


def jaas_login(jaas: str) -> tuple[str, str] | None:
    """(username, password) of a ScramLoginModule or PlainLoginModule JAAS
    config with just those two options, else None."""
    login = JAAS_LOGIN.fullmatch(jaas)
    if login is None:
        return None
    options, pos, text = {}, 0, login.group(1).rstrip()
    while pos < len(text):
        option = JAAS_OPTION.match(text, pos)
        if option is None:
            return None
        name, quoted, bare = option.groups()
        options[name] = re.sub(r"\\(.)", r"\1", quoted, flags=re.S) if quoted is not None else bare
        pos = option.end()
    if set(options) != {"username", "password"}:
        return None
    return options["username"], options["password"]


class KafkaClientOffsets:
    """Partition counts and watermarks through confluent_kafka (offsets only)."""

    def __init__(self):
        self._consumers: dict[str, Any] = {}

    @staticmethod
    def usable(config: Config) -> bool:
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            return False
        clients = [(f.source_bootstrap, f.source_client) for f in config.flows] + \
                  [(f.target_bootstrap, f.target_client) for f in config.flows]
        return all(librdkafka_config(b, c) is not None for b, c in clients)

    def _consumer(self, bootstrap: str, client: dict[str, str]):
        from confluent_kafka import Consumer
        key = json.dumps([normalize_bootstrap(bootstrap), client], sort_keys=True)
        if key not in self._consumers:
            conf = librdkafka_config(bootstrap, client)
            conf.update({"group.id": f"mirrorstack-validate-{uuid.uuid4().hex}", "enable.auto.commit": False,
                         "allow.auto.create.topics": False,
                         "log_level": 2})  # connection retries are reported once, as our error
            self._consumers[key] = Consumer(conf)
        return self._consumers[key]

    def watermarks(self, bootstrap: str, client: dict[str, str], topic: str) -> dict[int, tuple[int, int]] | None:
        """{partition: (low, high)}, or None when the topic does not exist."""
        from confluent_kafka import KafkaError, KafkaException, TopicPartition
        consumer = self._consumer(bootstrap, client)
        try:
            meta = consumer.list_topics(topic, timeout=15)
        except KafkaException as exc:
            raise RuntimeError(f"cannot reach Kafka at {bootstrap}: {exc}") from exc
        info = meta.topics.get(topic)
        if info is None or (info.error is not None and info.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            return None
        if info.error is not None:
            raise RuntimeError(f"metadata of {topic} at {bootstrap}: {info.error}")
        out = {}
        for p in sorted(info.partitions):
            for attempt in range(WATERMARK_ATTEMPTS):
                try:
                    out[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15, cached=False)
                    break
                except KafkaException as exc:  # a topic created a moment ago may still be electing its leader
                    error = exc.args[0]
                    transient = error.retriable() or error.code() in (
                        KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError._TIMED_OUT)
                    if not transient or attempt == WATERMARK_ATTEMPTS - 1:
                        raise
                    time.sleep(1)
        return out

    def topic_sizes(self, bootstrap: str, client: dict[str, str]) -> dict[str, int]:
        """{topic: records held now} of every topic at `bootstrap`."""
        from confluent_kafka import KafkaException
        try:
            names = sorted(self._consumer(bootstrap, client).list_topics(timeout=15).topics)
        except KafkaException as exc:
            raise RuntimeError(f"cannot reach Kafka at {bootstrap}: {exc}") from exc
        sizes = {}
        for name in names:
            marks = self.watermarks(bootstrap, client, name) or {}
            sizes[name] = sum(high - low for low, high in marks.values())
        return sizes

    def close(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()
        self._consumers.clear()


# ------------------------------------------------------------------- Spark

def default_jars() -> str | None:
    """The project's spark-sql-kafka jars when run from a mirrorstack checkout."""
    root = Path(__file__).resolve().parent.parent
    if (root / "components" / "toolchain.py").is_file() and str(root) not in sys.path:
        sys.path.append(str(root))
    try:
        from components import toolchain
        return ",".join(str(j) for j in toolchain.spark_kafka_jars())
    except Exception as exc:  # not in a checkout, or the jars are not installed
        _log(f"no default spark.jars ({exc})")
        return None


def build_spark(args: argparse.Namespace):
    """(session, how to end it): "jvm" when this process launched Spark's JVM
    (stop the session and the JVM), "session" under spark-submit (stop the
    session; spark-submit owns the JVM), "none" for a session that was already
    running. Under spark-submit the launcher's settings win."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        return SparkSession.builder.getOrCreate(), "none"
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ or SparkContext._gateway is not None
    builder = SparkSession.builder.appName("mirrorstack-validate-replication")
    jars = args.jars or (None if under_submit else default_jars())
    if jars:
        builder = builder.config("spark.jars", jars)
    if not under_submit:
        master = args.master or "local[2]"
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = (builder.master(master).config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.driver.memory", args.driver_memory))
        if master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # bind loopback only, from JVM start
            builder = (builder.config("spark.driver.host", "127.0.0.1")
                       .config("spark.driver.bindAddress", "127.0.0.1"))
    elif args.master:
        builder = builder.master(args.master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark, "session" if under_submit else "jvm"


def stop_spark(spark, how: str = "jvm") -> None:
    """Stop the session and, with how="jvm", the JVM this process launched (it
    exits when its stdin closes)."""
    from pyspark import SparkContext
    if how == "none":
        return
    spark.stop()
    gateway = SparkContext._gateway if how == "jvm" else None
    if gateway is not None:
        gateway.shutdown()
        proc = getattr(gateway, "proc", None)
        if proc is not None:
            proc.stdin.close()
            proc.wait(timeout=60)
        SparkContext._gateway = None
        SparkContext._jvm = None


def _quote_pattern(topic: str) -> str:
    return f"\\Q{topic}\\E"  # a Java regex matching exactly `topic`


def read_kafka(spark, bootstrap: str, client: dict[str, str], **options: str):
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in client.items():
        reader = reader.option(f"kafka.{key}", value)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def read_whole_topic(spark, bootstrap: str, client: dict[str, str], topic: str, headers: bool = True,
                     **options: str):
    """A batch read of everything in `topic` now (empty when it does not exist)."""
    return read_kafka(spark, bootstrap, client, subscribePattern=_quote_pattern(topic),
                      startingOffsets="earliest", endingOffsets="latest",
                      includeHeaders="true" if headers else "false", **options)


def tasks_for(rows: int) -> int:
    return max(2, -(-rows // ROWS_PER_TASK))


HEADERS_SQL = ("coalesce(concat_ws(',', transform(headers, h -> concat(hex(h.key), ':', "
               "coalesce(hex(h.value), '-')))), '')")


def hashed_records(df):
    """(partition, offset, ts, h): h = sha256 over sha256(key), sha256(value) and
    sha256 of the headers (null key/value distinct from empty)."""
    from pyspark.sql import functions as F
    key_hash = F.coalesce(F.sha2(F.col("key"), 256), F.lit("-"))
    value_hash = F.coalesce(F.sha2(F.col("value"), 256), F.lit("-"))
    headers_hash = F.sha2(F.expr(HEADERS_SQL), 256)
    return df.select(
        F.col("partition").cast("int").alias("partition"), F.col("offset"),
        F.coalesce(F.expr("unix_millis(timestamp)"), F.lit(-1)).alias("ts"),
        F.unhex(F.sha2(F.concat_ws("|", key_hash, value_hash, headers_hash), 256)).alias("h"))


def checkpoints_frame(spark, bootstrap: str, client: dict[str, str], topic: str):
    """MM2 Checkpoint records of `topic`, decoded: group, topic, partition,
    upstream_offset, downstream_offset (plus cp_partition/cp_offset)."""
    from pyspark.sql import functions as F
    frame = read_whole_topic(spark, bootstrap, client, topic, headers=False)
    for columns in CHECKPOINT_SQL:
        frame = frame.selectExpr(*columns)
    return (frame.where(F.col("version") == 0)
            .where(F.col("group").isNotNull() & F.col("topic").isNotNull() & F.col("partition").isNotNull()
                   & F.col("upstream_offset").isNotNull() & F.col("downstream_offset").isNotNull())
            .select("group", "topic", "partition", "upstream_offset", "downstream_offset",
                    "cp_partition", "cp_offset"))


def latest_checkpoints(frame):
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    w = Window.partitionBy("group", "topic", "partition").orderBy(F.col("cp_partition").desc(),
                                                                  F.col("cp_offset").desc())
    return frame.withColumn("_n", F.row_number().over(w)).where("_n = 1").drop("_n")


def jvm_topic_sizes(spark, bootstrap: str, client: dict[str, str]) -> dict[str, int]:
    """--offsets-via spark: {topic: records held now} through the Kafka Admin
    client that spark-sql-kafka brings onto the driver's classpath."""
    jvm = spark._jvm
    props = jvm.java.util.Properties()
    props.put("bootstrap.servers", bootstrap)
    props.put("default.api.timeout.ms", "30000")
    for key, value in client.items():
        props.put(key, value)
    admin = jvm.org.apache.kafka.clients.admin.Admin.create(props)
    try:
        names = admin.listTopics().names().get()
        described = admin.describeTopics(names).allTopicNames().get()
        spec = jvm.org.apache.kafka.clients.admin.OffsetSpec
        ends = {}
        for which in ("earliest", "latest"):
            request = jvm.java.util.HashMap()
            for name in names:
                for info in described.get(name).partitions():
                    request.put(jvm.org.apache.kafka.common.TopicPartition(name, info.partition()),
                                getattr(spec, which)())
            result = admin.listOffsets(request).all().get()
            ends[which] = {(tp.topic(), tp.partition()): result.get(tp).offset() for tp in result.keySet()}
        sizes = dict.fromkeys(names, 0)
        for (topic, partition), high in ends["latest"].items():
            sizes[topic] += high - ends["earliest"][(topic, partition)]
        return sizes
    finally:
        admin.close()


def spark_partition_stats(spark, bootstrap: str, client: dict[str, str], topic: str) -> dict[int, tuple[int, int]]:
    """--offsets-via spark: {partition: (min offset, max offset + 1)} of the
    partitions holding records (only these aggregates reach the driver)."""
    from pyspark.sql import functions as F
    rows = (read_whole_topic(spark, bootstrap, client, topic, headers=False)
            .groupBy("partition").agg(F.min("offset").alias("lo"), F.max("offset").alias("hi")).collect())
    return {int(r["partition"]): (int(r["lo"]), int(r["hi"]) + 1) for r in rows}


# -------------------------------------------------------------- validation

class Validator:
    def __init__(self, config: Config, spark, offsets_via: str, poll_seconds: float, sample_size: int,
                 log: Callable[[str], None] = _log, shuffle_partitions: int | None = None):
        self.config, self.spark, self.offsets_via = config, spark, offsets_via
        self.shuffle_partitions = shuffle_partitions
        self.poll_seconds, self.sample_size, self.log = poll_seconds, sample_size, log
        self.kafka = KafkaClientOffsets() if offsets_via == "kafka-client" else None
        self.persisted: list = []

    # -- offsets
    def snapshot(self) -> dict[tuple[int, str], dict[int, tuple[int, int]]]:
        """{(flow index, topic): {partition: (begin, snapshot end)}} taken now."""
        out, problems = {}, []
        for flow in self.config.flows:
            for j, topic in enumerate(flow.topics):
                if self.kafka:
                    marks = self.kafka.watermarks(flow.source_bootstrap, flow.source_client, topic)
                    if marks is None:
                        problems.append(f"flows[{flow.index}].topics[{j}]: topic {topic!r} does not exist at "
                                        f"{flow.source_bootstrap}")
                        continue
                else:
                    marks = spark_partition_stats(self.spark, flow.source_bootstrap, flow.source_client, topic)
                    if not marks:
                        problems.append(f"flows[{flow.index}].topics[{j}]: topic {topic!r} has no records (or does "
                                        f"not exist) at {flow.source_bootstrap}")
                        continue
                out[(flow.index, topic)] = marks
                self.log(f"snapshot {flow.name}:{topic}: {sum(e - b for b, e in marks.values())} records "
                         f"in {len(marks)} partition(s)")
        if problems:
            raise BadInput(problems)
        return out

    def target_partitions(self, group: Group) -> int | None:
        if self.kafka:
            marks = self.kafka.watermarks(group.target_bootstrap, group.target_client, group.topic)
            return None if marks is None else len(marks)
        return None  # spark mode: from the records read

    def target_count(self, group: Group) -> int:
        if self.kafka:
            marks = self.kafka.watermarks(group.target_bootstrap, group.target_client, group.topic)
            return 0 if marks is None else sum(high - low for low, high in marks.values())
        return read_whole_topic(self.spark, group.target_bootstrap, group.target_client, group.topic,
                                headers=False).count()

    def _persist(self, frame):
        from pyspark import StorageLevel
        # On disk, not the heap: cached batches of 10M+ rows would not fit a 1g driver.
        frame = frame.persist(StorageLevel.DISK_ONLY)
        self.persisted.append(frame)
        return frame

    # -- the frames
    def source_frame(self, group: Group, snap):
        from pyspark.sql import functions as F
        frames = []
        for m in group.members:
            marks = snap[(m.flow.index, m.topic)]
            raw = read_kafka(
                self.spark, m.flow.source_bootstrap, m.flow.source_client,
                assign=json.dumps({m.topic: sorted(marks)}),
                startingOffsets=json.dumps({m.topic: {str(p): b for p, (b, _) in marks.items()}}),
                endingOffsets=json.dumps({m.topic: {str(p): e for p, (_, e) in marks.items()}}),
                includeHeaders="true", minPartitions=str(tasks_for(sum(e - b for b, e in marks.values()))))
            frames.append(hashed_records(raw).withColumn("src", F.lit(m.src)))
        return self._persist(reduce(lambda a, b: a.unionByName(b), frames))

    def wait_for_targets(self, expected: dict[int, int]) -> tuple[dict[int, int], float]:
        groups = self.config.groups
        started = time.monotonic()
        deadline = started + self.config.wait_seconds
        while True:
            counts = {i: self.target_count(groups[i]) for i in expected}
            behind = {i: expected[i] - counts[i] for i in expected if counts[i] < expected[i]}
            elapsed = time.monotonic() - started
            if not behind:
                self.log(f"targets hold the expected records after {elapsed:.1f}s")
                return counts, elapsed
            if time.monotonic() >= deadline:
                self.log(f"wait bound of {self.config.wait_seconds:.0f}s expired; still behind: "
                         + ", ".join(f"{groups[i].topic} by {n}" for i, n in behind.items()))
                return counts, elapsed
            self.log(f"waiting ({elapsed:.0f}s of {self.config.wait_seconds:.0f}s): "
                     + ", ".join(f"{groups[i].topic} {counts[i]}/{expected[i]}" for i in behind))
            time.sleep(max(0.0, min(self.poll_seconds, deadline - time.monotonic())))

    # -- one group
    def validate_group(self, group: Group, snap, source, per_src: dict[tuple[int, int], int],
                       timed_out: bool, waited: float, target_hint: int = 0) -> dict:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        spark, n = self.spark, self.sample_size
        target_parts = self.target_partitions(group)
        if self.kafka and target_parts is None:
            target = spark.createDataFrame([], "partition int, offset long, ts long, h binary")
        else:
            target = hashed_records(read_whole_topic(spark, group.target_bootstrap, group.target_client,
                                                     group.topic, minPartitions=str(tasks_for(target_hint))))
        # Shuffles sized to the data (unless given): small sorts per task, flat memory.
        spark.conf.set("spark.sql.shuffle.partitions",
                       str(self.shuffle_partitions or tasks_for(sum(per_src.values()) + target_hint)))
        target = self._persist(target)
        target_records = target.count()
        if not self.kafka:
            observed = target.agg(F.max("partition")).first()[0]
            target_parts = None if observed is None else int(observed) + 1

        mk = ["partition", "ts", "h"]
        src = source.withColumn("occ", F.row_number().over(Window.partitionBy(*mk).orderBy("src", "offset"))) \
            .withColumnRenamed("offset", "s_offset")
        tgt = target.withColumn("occ", F.row_number().over(Window.partitionBy(*mk).orderBy("offset"))) \
            .withColumnRenamed("offset", "t_offset")
        joined = src.join(tgt, on=mk + ["occ"], how="full_outer")
        has_s, has_t = F.col("s_offset").isNotNull(), F.col("t_offset").isNotNull()
        # (A struct of nulls is not null and sorts first: only source rows may be the partner.)
        first = F.min(F.when(has_s, F.struct("src", "s_offset"))).over(Window.partitionBy(*mk))
        joined = (joined
                  .withColumn("partner", first["s_offset"])
                  .withColumn("owner", F.coalesce("src", first["src"]))
                  .withColumn("last_matched", F.max(F.when(has_s & has_t, F.col("s_offset")))
                              .over(Window.partitionBy("src", "partition"))))
        kind = (F.when(has_s & has_t, "matched")
                .when(has_s & F.lit(timed_out) & (F.col("s_offset") > F.coalesce("last_matched", F.lit(-1))),
                      "in_flight")
                .when(has_s, "missing")
                .when(F.col("partner").isNotNull(), "duplicates")
                .otherwise("extras"))
        # A duplicate counts for the source of the record it copies (`owner`); extras have none.
        classified = self._persist(joined.select(F.col("owner").alias("src"), "partition", "s_offset", "t_offset",
                                                 "partner", kind.alias("kind")))
        counts = classified.groupBy("src", "partition", "kind").count().collect()

        def total(kind_name, src_id=None):
            return sum(r["count"] for r in counts if r["kind"] == kind_name and (src_id is None or r["src"] == src_id))

        members = {m.src: m for m in group.members}
        samples: dict[str, list] = {}
        for name in ("missing", "in_flight"):
            if total(name):
                rows = (classified.where(F.col("kind") == name).orderBy("src", "partition", "s_offset")
                        .select("src", "partition", "s_offset").limit(n).collect())
                samples[name] = [{"flow": members[r["src"]].flow.name, "topic": members[r["src"]].topic,
                                  "partition": r["partition"], "source_offset": r["s_offset"],
                                  "target_offset": None} for r in rows]
        for name, source_col in (("duplicates", "partner"), ("extras", None)):
            if total(name):
                rows = (classified.where(F.col("kind") == name).orderBy("partition", "t_offset")
                        .select("partition", "t_offset", *([source_col] if source_col else [])).limit(n).collect())
                samples[name] = [{"topic": group.topic, "partition": r["partition"],
                                  "source_offset": r[source_col] if source_col else None,
                                  "target_offset": r["t_offset"]} for r in rows]

        pairs = classified.where(F.col("kind") == "matched").select("src", "partition", "s_offset", "t_offset")
        ordered = pairs.withColumn("prev", F.lag("s_offset").over(
            Window.partitionBy("src", "partition").orderBy("t_offset")))
        disorder = ordered.where(F.col("prev") > F.col("s_offset"))
        ooo_by_src = {r["src"]: r["count"] for r in disorder.groupBy("src").count().collect()}
        if ooo_by_src:
            rows = disorder.orderBy("src", "partition", "t_offset").limit(n).collect()
            samples["out_of_order"] = [{"flow": members[r["src"]].flow.name, "topic": members[r["src"]].topic,
                                        "partition": r["partition"], "source_offset": r["s_offset"],
                                        "previous_source_offset": r["prev"], "target_offset": r["t_offset"]}
                                       for r in rows]

        sources, lag = [], []
        partitions_ok = target_parts is not None
        for m in group.members:
            marks = snap[(m.flow.index, m.topic)]
            sources.append({"flow": m.flow.name, "topic": m.topic, "source_bootstrap": m.flow.source_bootstrap,
                            "partitions": len(marks), "window": {str(p): list(be) for p, be in marks.items()}})
            partitions_ok = partitions_ok and len(marks) == target_parts
            for p in sorted(marks):
                expected = per_src.get((m.src, p), 0)
                matched = sum(r["count"] for r in counts
                              if r["kind"] == "matched" and r["src"] == m.src and r["partition"] == p)
                lag.append({"flow": m.flow.name, "topic": m.topic, "partition": p, "expected": expected,
                            "matched": matched, "lag": expected - matched})

        failover = [entry for m in group.members if m.flow.checkpoints_topic
                    for entry in self.failover(group, m, pairs)]
        report = {
            "target_bootstrap": group.target_bootstrap, "topic": group.topic,
            "flows": list(dict.fromkeys(m.flow.name for m in group.members)),
            "sources": sources, "target_partitions": target_parts, "partitions_ok": bool(partitions_ok),
            "waited_seconds": round(waited, 1), "timed_out": timed_out,
            "source_records": sum(per_src.values()), "target_records": target_records,
            "matched": total("matched"), "missing": total("missing"), "in_flight": total("in_flight"),
            "duplicates": total("duplicates"), "extras": total("extras"),
            "out_of_order": sum(ooo_by_src.values()),
            "samples": samples, "lag": lag, "failover": failover,
            "_per_src": {m.src: {"source_records": sum(v for (s, _), v in per_src.items() if s == m.src),
                                 "matched": total("matched", m.src), "missing": total("missing", m.src),
                                 "in_flight": total("in_flight", m.src), "duplicates": total("duplicates", m.src),
                                 "out_of_order": ooo_by_src.get(m.src, 0)}
                         for m in group.members},
        }
        return report

    def failover(self, group: Group, member: Member, pairs) -> list[dict]:
        from pyspark.sql import functions as F
        flow = member.flow
        cps = checkpoints_frame(self.spark, group.target_bootstrap, group.target_client, flow.checkpoints_topic)
        cps = cps.where(F.col("topic") == group.topic)
        if flow.groups:
            cps = cps.where(F.col("group").rlike("^(?:" + "|".join(f"(?:{g})" for g in flow.groups) + ")$"))
        if flow.groups_exclude:
            cps = cps.where(~F.col("group").rlike("^(?:" + "|".join(f"(?:{g})" for g in flow.groups_exclude)
                                                  + ")$"))
        latest = self._persist(latest_checkpoints(cps).select("group", "partition", "upstream_offset",
                                                              "downstream_offset"))
        per_group = (latest.groupBy("group")
                     .agg(F.count("*").alias("partitions"),
                          F.sort_array(F.collect_list(F.struct("partition", "upstream_offset",
                                                               "downstream_offset"))).alias("cps"))
                     .collect())
        mine = pairs.where(F.col("src") == member.src).select("partition", "s_offset", "t_offset")
        joined = mine.join(F.broadcast(latest), "partition")
        lost = (F.col("t_offset") < F.col("downstream_offset")) & (F.col("s_offset") >= F.col("upstream_offset"))
        reread = (F.col("t_offset") >= F.col("downstream_offset")) & (F.col("s_offset") < F.col("upstream_offset"))
        outcome = {r["group"]: (r["lost"], r["reread"]) for r in joined.groupBy("group").agg(
            F.sum(lost.cast("long")).alias("lost"), F.sum(reread.cast("long")).alias("reread")).collect()}
        entries = []
        for r in sorted(per_group, key=lambda r: r["group"]):
            lost_n, reread_n = outcome.get(r["group"], (0, 0))
            entries.append({"flow": flow.name, "consumer_group": r["group"], "topic": group.topic,
                            "checkpoints_topic": flow.checkpoints_topic, "partitions": r["partitions"],
                            "lost": int(lost_n or 0), "reread": int(reread_n or 0),
                            "checkpoints": [{"partition": c["partition"], "upstream_offset": c["upstream_offset"],
                                             "downstream_offset": c["downstream_offset"]} for c in r["cps"][:50]]})
        for regex in (flow.groups or ()) if flow.groups_required else ():
            if not any(re.fullmatch(regex, e["consumer_group"]) for e in entries):
                entries.append({"flow": flow.name, "consumer_group": regex, "topic": group.topic,
                                "checkpoints_topic": flow.checkpoints_topic, "partitions": 0, "lost": 0,
                                "reread": 0, "checkpoints": [], "unmatched_regex": True})
        return entries

    def run(self, snap=None) -> dict:
        started = time.time()
        config = self.config
        try:
            snap = snap if snap is not None else self.snapshot()
            sources, expected, per_src = {}, {}, {}
            for i, group in enumerate(config.groups):
                sources[i] = self.source_frame(group, snap)
                per_src[i] = {(r["src"], r["partition"]): r["count"]
                              for r in sources[i].groupBy("src", "partition").count().collect()}
                expected[i] = sum(per_src[i].values())
            counts, waited = self.wait_for_targets(expected)
            groups = []
            for i, group in enumerate(config.groups):
                self.log(f"validating {group.topic} on {group.target_bootstrap}")
                result = self.validate_group(group, snap, sources[i], per_src[i],
                                             timed_out=counts[i] < expected[i], waited=waited,
                                             target_hint=counts[i])
                result["failures"] = group_failures(result, config.tolerance)
                result["passed"] = not result["failures"]
                groups.append(result)
        finally:
            for frame in self.persisted:
                try:
                    frame.unpersist()
                except Exception:  # noqa: BLE001 - Spark already failed; keep that error, not this one
                    break
            if self.kafka:
                self.kafka.close()
        flows = []
        for flow in config.flows:
            topics = []
            for topic in flow.topics:
                gi, g = next((gi, g) for gi, g in enumerate(config.groups)
                             for m in g.members if m.flow.index == flow.index and m.topic == topic)
                m = next(m for m in g.members if m.flow.index == flow.index and m.topic == topic)
                topics.append({"topic": topic, "remote_topic": g.topic, "group": gi,
                               **groups[gi]["_per_src"][m.src]})
            flows.append({"name": flow.name, "topics": topics})
        for g in groups:
            g.pop("_per_src")
        failures = [f for g in groups for f in g["failures"]]
        return {"passed": not failures, "exit_code": EXIT_FAILED if failures else EXIT_PASSED,
                "failures": failures,
                "started_at": datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(),
                "duration_seconds": round(time.time() - started, 1), "offsets_via": self.offsets_via,
                "wait_seconds": config.wait_seconds, "tolerance": config.tolerance,
                "groups": groups, "flows": flows}


# --------------------------------------------------------------------- CLI

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    doc = __doc__ or ""
    epilog = doc[doc.index("Input ("):doc.index("Method\n")] + doc[doc.index("Pass/fail"):] \
        if "Input (" in doc and "Pass/fail" in doc else None
    parser = argparse.ArgumentParser(
        prog="validate_replication.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Validate MirrorMaker 2 replication (completeness, duplicates, extras, order,\n"
                    "partition mapping, lag, offset-translation failover) with PySpark. The report's\n"
                    "JSON schema and the method are in this file's docstring.",
        epilog=epilog)
    parser.add_argument("--config", metavar="FILE", help="JSON file with `flows` (see the module docstring)")
    parser.add_argument("--config-json", metavar="TEXT", help="the same JSON inline, instead of --config")
    parser.add_argument("--out", metavar="FILE", help="write the JSON report here")
    parser.add_argument("--wait-seconds", type=float, metavar="S",
                        help="override the config's wait_seconds (bound on waiting for the targets)")
    parser.add_argument("--poll-seconds", type=float, default=2.0, metavar="S",
                        help="interval between target counts while waiting (default 2)")
    parser.add_argument("--sample-size", type=int, default=5, metavar="N",
                        help="rows per sample in the report (default 5)")
    parser.add_argument("--offsets-via", choices=("auto", "kafka-client", "spark"), default="auto",
                        help="how the driver reads offsets and partition counts: confluent_kafka "
                             "(kafka-client), aggregates over Spark reads (spark), or kafka-client when "
                             "importable and the client settings translate (auto, the default)")
    parser.add_argument("--jars", metavar="JARS",
                        help="comma-separated spark.jars (spark-sql-kafka and deps); default: the "
                             "project's .tools/spark-kafka jars when run from a checkout; under "
                             "spark-submit pass --jars/--packages to spark-submit instead")
    parser.add_argument("--master", metavar="URL",
                        help="Spark master (default local[2]; under spark-submit, spark-submit's)")
    parser.add_argument("--driver-memory", default="1g", metavar="SIZE",
                        help="heap of the driver JVM, which also runs the local[*] executors (default 1g; "
                             "the job's memory does not grow with the data, so this rarely needs raising). "
                             "Under spark-submit, pass spark-submit's own --driver-memory instead")
    parser.add_argument("--shuffle-partitions", type=int, default=None, metavar="N",
                        help="spark.sql.shuffle.partitions for the comparison (default: one per 400,000 rows, at least 2)")
    parser.add_argument("--report-only", action="store_true",
                        help="exit 0 when the validation fails (the report still says FAILED); "
                             "bad input and errors still exit 2 and 3")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser.parse_args(argv)


def hide_secrets(text: str, config: Config) -> str:
    """`text` (an error from Kafka or Spark) without the values read through
    `${file:...}` references, nor a JAAS password among them."""
    secrets = {value for flow in config.flows for client in (flow.source_client, flow.target_client)
               for value in client.values() if isinstance(value, Secret)}
    secrets |= {login[1] for login in map(jaas_login, list(secrets)) if login}
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        text = text.replace(secret, "<hidden>")
    return text


def main(argv: list[str] | None = None, spark=None) -> int:
    """Run the job; returns the exit code. With `spark` given, that session is
    used and left running (its owner stops it)."""
    args = parse_args(argv)
    log = (lambda _m: None) if args.quiet else _log
    try:
        config = load_config(args)
        if (args.sample_size < 0 or args.poll_seconds <= 0
                or (args.shuffle_partitions is not None and args.shuffle_partitions < 1)):
            raise BadInput(["--sample-size >= 0, --poll-seconds > 0, --shuffle-partitions >= 1"])
        if not re.fullmatch(r"[1-9][0-9]*[kKmMgGtT]?", args.driver_memory):
            raise BadInput([f"--driver-memory: {args.driver_memory!r} is not a JVM size like 1g or 1536m"])
    except BadInput as exc:
        for problem in exc.problems:
            print(f"bad input: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT

    offsets_via = args.offsets_via
    if offsets_via == "auto":
        offsets_via = "kafka-client" if KafkaClientOffsets.usable(config) else "spark"
    elif offsets_via == "kafka-client" and not KafkaClientOffsets.usable(config):
        print("bad input: --offsets-via kafka-client: confluent_kafka is missing or a client setting "
              "has no librdkafka equivalent", file=sys.stderr)
        return EXIT_BAD_INPUT

    ending = "none"
    try:
        validator = Validator(config, spark, offsets_via, args.poll_seconds, args.sample_size, log,
                              args.shuffle_partitions)
        snap = None
        if offsets_via == "kafka-client":
            # Topics, the snapshot (and a missing source topic) come before Spark starts.
            validator.config = resolve_topics(config, validator.kafka.topic_sizes, log)
            snap = validator.snapshot()
        if spark is None and (offsets_via == "spark" or validator.config.groups):
            spark, ending = build_spark(args)
            validator.spark = spark
        if offsets_via == "spark":
            validator.config = resolve_topics(config, lambda b, c: jvm_topic_sizes(spark, b, c), log)
        report = validator.run(snap)
    except BadInput as exc:
        for problem in exc.problems:
            print(f"bad input: {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - reported, exit 3
        message = hide_secrets(f"{type(exc).__name__}: {exc}", config)
        if "kafka" in message.lower() and "data source" in message.lower():
            message += " (the spark-sql-kafka jars are missing: pass --jars)"
        if "OutOfMemoryError" in message or "SparkContext was shut down" in message:
            message += " (the driver ran out of heap: raise --driver-memory or --shuffle-partitions)"
        print(f"error: the validation could not run: {message}", file=sys.stderr)
        if args.out:
            Path(args.out).write_text(json.dumps({"passed": False, "exit_code": EXIT_ERROR, "error": message},
                                                 indent=2) + "\n")
        return EXIT_ERROR
    finally:
        if spark is not None:
            stop_spark(spark, ending)

    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(summary_text(report), flush=True)
    return EXIT_PASSED if args.report_only else report["exit_code"]


if __name__ == "__main__":
    sys.exit(main())
