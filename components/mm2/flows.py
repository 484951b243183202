"""The one meaning of a flow: which topics and consumer groups it copies, their
remote names, and what is never replicated. MirrorMaker 2's naming and topic
selection, as its own classes decide them: DefaultReplicationPolicy and
IdentityReplicationPolicy (remote names, the internal topics' names under any
separator, which topics are internal or heartbeats, cycles) and
MirrorSourceConnector.shouldReplicateTopic.

Everyone asks this module: the model rules, the replication plan, the
connector configs, failover and the validation job. A flow crosses every
boundary as one FlowDescription (to_dict/from_dict for JSON), never as a
second dict. tests/unit/test_mm2_names.py
checks every answer against the pinned MM2 jars for several separators;
tests/unit/test_flow_meaning.py that the model, the plan and the job agree.
Pure: standard library only.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from .connectors import KINDS, connector_name
from .flow_settings import NESTED, FlowThroughput, NamesByKind, OverridesByKind, nested, plain, whole_number

HEARTBEATS = "heartbeats"  # ReplicationPolicy.heartbeatsTopic()
# DefaultTopicFilter's topics.exclude default: MM2 leaves these out whatever `topics` says.
DEFAULT_TOPICS_EXCLUDE = (r".*[\-\.]internal", r".*\.replica", r"__.*")
# Kafka Connect's storage topics (<group>-configs|offsets|status): mirrorstack's groups,
# Kafka's sample names and Strimzi's. MM2's internal-topic filter does not know them.
CONNECT_STORAGE_TOPICS = (r"mirrorstack-.+-(configs|offsets|status)", r"(.+[-.])?connect(-cluster)?-(configs|offsets|status)")
# What no flow ever replicates: a flow's own excludes add to these (its connectors'
# topics.exclude, the plan, the job's selection and failover all start from this one list).
NEVER_REPLICATED_TOPICS = (*DEFAULT_TOPICS_EXCLUDE, *CONNECT_STORAGE_TOPICS)
# DefaultGroupFilter's groups.exclude default.
NEVER_REPLICATED_GROUPS = (r"console-consumer-.*", r"connect-.*", r"__.*")


def _java_split(text: str, separator: str) -> list[str]:
    """String.split(Pattern.quote(separator)): Java drops trailing empty strings."""
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


@dataclass(frozen=True)
class ReplicationPolicy:
    """`kind` "default" or "identity"; `source_alias`: the flow's source cluster
    (IdentityReplicationPolicy's `source.cluster.alias`)."""
    kind: str = "default"
    separator: str = "."
    source_alias: str | None = None

    def _looks_like_heartbeat(self, topic: str) -> bool:
        return self.kind == "identity" and topic.endswith(HEARTBEATS)

    def remote_topic(self, source_alias: str, topic: str) -> str:
        if self.kind == "identity" and not topic.endswith(HEARTBEATS):
            return topic
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        if self.kind == "identity" and not self._looks_like_heartbeat(topic):
            return self.source_alias
        parts = _java_split(topic, self.separator)
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        if self.kind == "identity" and not self._looks_like_heartbeat(topic):
            return topic
        source = self.topic_source(topic)
        return None if source is None else topic[len(source) + len(self.separator):]

    def original_topic(self, topic: str) -> str:
        while True:
            upstream = self.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return topic
            topic = upstream

    # The internal topics: named with the separator (replication.policy.internal.topic.separator.enabled).
    def _internal_suffix(self) -> str:
        return f"{self.separator}internal"

    def checkpoints_topic(self, alias: str) -> str:
        """`<alias><sep>checkpoints<sep>internal`: a flow's checkpoints, on its target, named after its source."""
        return f"{alias}{self.separator}checkpoints{self._internal_suffix()}"

    def offset_syncs_topic(self, alias: str) -> str:
        """`mm2-offset-syncs<sep><alias><sep>internal`; mirrorstack keeps them on the
        target, where MM2 names them after the source alias."""
        return f"mm2-offset-syncs{self.separator}{alias}{self._internal_suffix()}"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.original_topic(topic) == HEARTBEATS

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(f"{self.separator}checkpoints{self._internal_suffix()}")

    def is_internal_topic(self, topic: str) -> bool:
        """Kafka's own (`__x`, `.x`) and MM2's (`mm2…<sep>internal`, checkpoints): never
        replicated. Connect's `*-internal` storage topics are not, to the policy:
        the topic filter's default excludes leave them out."""
        mm2_internal = topic.startswith("mm2") and topic.endswith(self._internal_suffix())
        return topic.startswith(("__", ".")) or mm2_internal or self.is_checkpoints_topic(topic)

    def is_cycle(self, topic: str, target_alias: str) -> bool:
        """Whether `topic` came from `target_alias` (through any chain of remote names)."""
        while True:
            source = self.topic_source(topic)
            if source is None:
                return False
            if source == target_alias:
                return True
            upstream = self.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return False
            topic = upstream


def _full_match(patterns: Iterable[str], name: str) -> bool:
    """java.util.regex `matches()`: a full match. A regex Python cannot compile
    matches nothing here (the model reports it; the job refuses it as input)."""
    for pattern in patterns:
        try:
            if re.fullmatch(pattern, name):
                return True
        except re.error:
            continue
    return False


def replicates(policy: ReplicationPolicy, topic: str, *, target_alias: str, topics: Iterable[str],
               topics_exclude: Iterable[str] = DEFAULT_TOPICS_EXCLUDE) -> bool:
    """MirrorSourceConnector.shouldReplicateTopic: picked by the topic filter (java
    regexes, full match) or a heartbeats topic, never internal, never a cycle."""
    picked = _full_match(topics, topic) and not _full_match(topics_exclude, topic)
    return ((picked or policy.is_heartbeats_topic(topic)) and not policy.is_internal_topic(topic)
            and not policy.is_cycle(topic, target_alias))


def _union(*lists: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for patterns in lists for p in patterns))


@dataclass(frozen=True)
class FlowSelection:
    """What one flow copies, from `source` to `target`: `topics`/`groups` regexes
    and the flow's own excludes (the never-replicated lists always apply), under
    the replication `policy` ("default" or "identity") with its `separator`.
    Built from a FlowDescription (`FlowDescription.selection`)."""
    source: str | None
    target: str | None
    topics: tuple[str, ...] = ()
    topics_exclude: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    groups_exclude: tuple[str, ...] = ()
    policy: str = "default"
    separator: str = "."

    @property
    def mm2(self) -> ReplicationPolicy:
        """The flow's MM2 replication policy: every name MM2 gives (remote topics, its internal topics)."""
        return ReplicationPolicy(self.policy, self.separator, self.source)

    @property
    def all_topics_exclude(self) -> tuple[str, ...]:
        """Everything the flow never replicates: the never-replicated topics, then its own."""
        return _union(NEVER_REPLICATED_TOPICS, self.topics_exclude)

    @property
    def all_groups_exclude(self) -> tuple[str, ...]:
        return _union(NEVER_REPLICATED_GROUPS, self.groups_exclude)

    def selects(self, topic: str) -> bool:
        """Whether MM2 copies this source topic: picked by the topic filter or a
        heartbeats topic, never internal, never a cycle (known with a `target`)."""
        return replicates(self.mm2, topic, target_alias=self.target, topics=self.topics,
                          topics_exclude=self.all_topics_exclude)

    def selects_group(self, group: str) -> bool:
        return _full_match(self.groups, group) and not _full_match(self.all_groups_exclude, group)

    def remote(self, topic: str) -> str:
        """The topic's name on the target: the default policy prefixes the source
        alias; identity keeps the name (but a heartbeats topic's)."""
        if self.policy == "identity" and self.source is None:
            return topic
        return self.mm2.remote_topic(self.source, topic)

    def selected_topics(self, names: Iterable[str]) -> list[str]:
        return sorted(t for t in names if self.selects(t))

    def selected_groups(self, names: Iterable[str]) -> list[str]:
        return sorted(g for g in names if self.selects_group(g))


# What decides which topics and groups a flow copies and how it names them (`changes`).
MEANING_FIELDS = ("source", "target", "topics", "topics_exclude", "groups", "groups_exclude", "replication_policy",
                  "separator", "sync_topic_configs", "checkpoints")
# What only the connectors use: the records a flow copies are the same whatever they are.
CONNECTOR_SETTINGS = ("heartbeats", "sync_group_offsets", "sync_topic_acls", "config_sync_seconds", "tasks_max",
                      "refresh_seconds", "throughput", "overrides", "connector_names", "take_over")
# Fields to_dict leaves out at their default: a flow that never set them keeps the
# dict it had before they existed (stacks' exported plans, the job's input).
LATER_FIELDS = ("compression", "exactly_once", "heartbeats", "sync_group_offsets", "sync_topic_acls",
                "config_sync_seconds", "tasks_max", "refresh_seconds", "throughput", "overrides", "connector_names",
                "take_over")


@dataclass(frozen=True)
class FlowDescription:
    """A flow as every side of mirrorstack passes it: the model builds it
    (mirrorstack.model.spec.Flow.description), the connector generator, the
    replication plan (and the stack's exported `replication_plan`), the rename
    check (read back from a connector's config), failover (the switch's props
    and its Job) and the validation job (its config) take it. JSON crosses as
    `to_dict()`, read back by `from_dict()`: the one dict shape of a flow.

    `source`/`target`: cluster aliases (None only in the validation job's
    hand-written input, which may leave them out); `topics`/`groups`: regexes
    and the flow's own excludes (the never-replicated lists always apply);
    `compression` and `exactly_once` are what the plan checks of its records.
    The rest is what the connector generator writes (the model's fields of
    the same names; the defaults are the model's): which connectors run, their
    tasks and intervals, `throughput`, raw `overrides` per connector kind, the
    connector names given (`connector_names`) and the connectors `take_over`
    replaces."""
    name: str
    source: str | None
    target: str | None
    topics: tuple[str, ...] = (".*",)
    topics_exclude: tuple[str, ...] = ()
    groups: tuple[str, ...] = (".*",)
    groups_exclude: tuple[str, ...] = ()
    replication_policy: str = "default"
    separator: str = "."
    sync_topic_configs: bool = True
    checkpoints: bool = True
    compression: str | None = None
    exactly_once: bool = False
    heartbeats: bool = True
    sync_group_offsets: bool = False
    sync_topic_acls: bool = False
    config_sync_seconds: int | None = None
    tasks_max: int = 2
    refresh_seconds: int = 60
    throughput: FlowThroughput = FlowThroughput()
    overrides: OverridesByKind = OverridesByKind()
    connector_names: NamesByKind = NamesByKind()
    take_over: NamesByKind = NamesByKind()

    def selection(self) -> FlowSelection:
        """What the flow copies and the names it gives (the one meaning of a flow)."""
        return FlowSelection(source=self.source, target=self.target, topics=self.topics,
                             topics_exclude=self.topics_exclude, groups=self.groups,
                             groups_exclude=self.groups_exclude, policy=self.replication_policy,
                             separator=self.separator)

    @property
    def mm2(self) -> ReplicationPolicy:
        return self.selection().mm2

    def checkpoints_topic(self) -> str:
        """MM2's checkpoints of the flow, on its target: `<source><sep>checkpoints<sep>internal`."""
        return self.mm2.checkpoints_topic(self.source)

    def offset_syncs_topic(self) -> str:
        """MM2's offset syncs of the flow: on the target (offset-syncs.topic.location=target),
        named after the source alias, with the flow's separator."""
        return self.mm2.offset_syncs_topic(self.source)

    def connector_name(self, kind: str) -> str:
        """The flow's connector of a kind (source, checkpoint, heartbeat): the name
        given, else mirrorstack's (`us->central.MirrorSourceConnector`)."""
        return getattr(self.connector_names, kind) or connector_name(self.name, KINDS[kind])

    def renames(self, old: FlowDescription | None) -> bool:
        """Whether this flow, deployed before as `old`, now writes under other names."""
        return old is not None and (old.replication_policy, old.separator) != (self.replication_policy, self.separator)

    def changes(self, old: FlowDescription) -> list[str]:
        """The fields deciding what the flow copies and how it names it that differ from `old`."""
        return [name for name in MEANING_FIELDS if getattr(old, name) != getattr(self, name)]

    def to_dict(self, *, named: bool = True, connector_settings: bool = True) -> dict[str, Any]:
        """JSON-able, lists for tuples; `named=False` leaves the name out (a
        mapping keyed by name holds it). The fields added after the first
        shape (LATER_FIELDS) only where they differ from their default, a
        nested one with only what differs: a flow that sets none of them has
        the dict it had before they existed (a stack exported then previews
        no change). `connector_settings=False` leaves out the settings only
        the connectors use (CONNECTOR_SETTINGS): what reads the records (the
        validation job) is then not re-run by a change of, say, tasks_max."""
        left_out = {f.name for f in fields(self) if f.name in LATER_FIELDS and getattr(self, f.name) == f.default}
        if not named:
            left_out.add("name")
        if not connector_settings:
            left_out.update(CONNECTOR_SETTINGS)
        return {f.name: plain(getattr(self, f.name)) for f in fields(self) if f.name not in left_out}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], name: str | None = None) -> FlowDescription:
        """The inverse of to_dict (`name`: the key of a mapping keyed by name).
        A missing field takes its default (a dict of an older shape reads);
        an unknown one, or a value of the wrong kind, raises ValueError naming
        it. Whole numbers may come as floats (Pulumi's dynamic props)."""
        if not isinstance(data, Mapping):
            raise ValueError("a flow must be an object")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(unknown)} (known: {', '.join(known)})")
        values = dict(data)
        if name is not None:
            values.setdefault("name", name)
        if not isinstance(values.get("name"), str) or not values["name"]:
            raise ValueError("name: must be a non-empty string")
        for key in ("source", "target", "replication_policy", "separator", "compression"):
            if key in values and values[key] is not None and not isinstance(values[key], str):
                raise ValueError(f"{key}: must be a string")
        for key in ("topics", "topics_exclude", "groups", "groups_exclude"):
            if key in values:
                if not isinstance(values[key], (list, tuple)) or not all(isinstance(p, str) for p in values[key]):
                    raise ValueError(f"{key}: must be a list of regexes")
                values[key] = tuple(values[key])
        for key in ("sync_topic_configs", "checkpoints", "exactly_once", "heartbeats", "sync_group_offsets",
                    "sync_topic_acls"):
            if key in values and not isinstance(values[key], bool):
                raise ValueError(f"{key}: must be true or false")
        for key in ("tasks_max", "refresh_seconds", "config_sync_seconds"):
            if key in values:
                values[key] = whole_number(values[key], key, allow_none=key == "config_sync_seconds")
        for key in NESTED:
            if key in values:
                values[key] = nested(key, values[key])
        return cls(**{"source": None, "target": None, **values})
