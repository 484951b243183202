"""MirrorMaker 2's naming and topic selection, as its own classes decide them:
DefaultReplicationPolicy and IdentityReplicationPolicy (remote names, the
internal topics' names under any separator, which topics are internal or
heartbeats, cycles) and MirrorSourceConnector.shouldReplicateTopic.

The one place these rules live: the validation job imports this module by its
bare name (it ships with the job's other validation_*.py modules), the
components as `components.jobs.validation_mm2`. tests/unit/test_mm2_names.py
checks every answer against the pinned MM2 jars for several separators.
Pure: standard library only.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

HEARTBEATS = "heartbeats"  # ReplicationPolicy.heartbeatsTopic()
# DefaultTopicFilter's topics.exclude default: MM2 leaves these out whatever `topics` says.
DEFAULT_TOPICS_EXCLUDE = (r".*[\-\.]internal", r".*\.replica", r"__.*")


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
    return any(re.fullmatch(p, name) for p in patterns)


def replicates(policy: ReplicationPolicy, topic: str, *, target_alias: str, topics: Iterable[str],
               topics_exclude: Iterable[str] = DEFAULT_TOPICS_EXCLUDE) -> bool:
    """MirrorSourceConnector.shouldReplicateTopic: picked by the topic filter (java
    regexes, full match) or a heartbeats topic, never internal, never a cycle."""
    picked = _full_match(topics, topic) and not _full_match(topics_exclude, topic)
    return ((picked or policy.is_heartbeats_topic(topic)) and not policy.is_internal_topic(topic)
            and not policy.is_cycle(topic, target_alias))
