"""The one meaning of a flow: which topics and consumer groups it copies, their
remote names, and what is never replicated. MirrorMaker 2's naming and topic
selection, as its own classes decide them: DefaultReplicationPolicy and
IdentityReplicationPolicy (remote names, the internal topics' names under any
separator, which topics are internal or heartbeats, cycles) and
MirrorSourceConnector.shouldReplicateTopic.

Everyone asks this module: the model rules, the replication plan, the
connector configs, failover and the validation job. tests/unit/test_mm2_names.py
checks every answer against the pinned MM2 jars for several separators;
tests/unit/test_flow_meaning.py that the model, the plan and the job agree.
Pure: standard library only.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

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
    The control plane builds it from the model's Flow or a stack's flow spec
    (`of`), the job from its input."""
    source: str | None
    target: str | None
    topics: tuple[str, ...] = ()
    topics_exclude: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    groups_exclude: tuple[str, ...] = ()
    policy: str = "default"
    separator: str = "."

    @classmethod
    def of(cls, flow) -> FlowSelection:
        """From a model Flow or a flow spec dict (source, target, topics, topics_exclude,
        groups, groups_exclude, replication_policy, separator)."""
        get = flow.get if isinstance(flow, dict) else (lambda key, default=None: getattr(flow, key, default))
        return cls(source=get("source"), target=get("target"), topics=tuple(get("topics") or ()),
                   topics_exclude=tuple(get("topics_exclude") or ()), groups=tuple(get("groups") or ()),
                   groups_exclude=tuple(get("groups_exclude") or ()),
                   policy=get("replication_policy") or "default", separator=get("separator") or ".")

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
