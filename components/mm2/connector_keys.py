"""The one table between a flow's fields and its MM2 connectors' config keys:
which key carries which field, on which of the flow's connectors, written how.

The connector generator writes a flow's fields under these keys (`written`),
the model refuses an override of any of them but the `overridable` ones (the
typed field says it), and the rename check reads a live connector's flow back
from them (`flow_fields`). Standard library only."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields

from .connectors import POLICY_CLASSES
from .flows import NEVER_REPLICATED_GROUPS, NEVER_REPLICATED_TOPICS, FlowDescription

ALL_KINDS = ("source", "checkpoint", "heartbeat")
# How a field is written as a string (Connect wants strings): "alias" and "text" as they
# are, "number", "flag" (true/false), "regexes" (comma-separated), "policy" (MM2's class).
SHAPES = ("alias", "text", "number", "flag", "regexes", "policy")


@dataclass(frozen=True)
class FlowKey:
    """Config `key` carries the flow's `field`, written as its `shape`, on the
    connectors of `kinds` (none: a key MM2 reads for the field that mirrorstack
    never writes, such as an older name). `always`: patterns written before the
    flow's own (what no flow replicates). `absent`: the field's value, as MM2
    takes it, when a config lacks the key (None: no reading without it).
    `overridable`: a flow's overrides may set it (MM2's default applies unless
    the field is set)."""
    key: str
    field: str
    shape: str = "text"
    kinds: tuple[str, ...] = ALL_KINDS
    always: tuple[str, ...] = ()
    absent: str | None = None
    overridable: bool = False

    def write(self, value) -> str:
        if self.shape == "number":
            return str(value)
        if self.shape == "flag":
            return "true" if value else "false"
        if self.shape == "policy":
            return POLICY_CLASSES[value]
        if self.shape == "regexes":
            return ",".join(dict.fromkeys((*self.always, *value)) if self.always else value)
        return value

    def read(self, text: str):
        if self.shape == "number":
            return int(text)
        if self.shape == "flag":
            return text.strip().lower() == "true"
        if self.shape == "policy":
            return {cls: name for name, cls in POLICY_CLASSES.items()}.get(text, "default")
        if self.shape == "regexes":
            return [pattern for pattern in text.split(",") if pattern]
        return text


FLOW_KEYS = (
    FlowKey("source.cluster.alias", "source", "alias"),
    FlowKey("target.cluster.alias", "target", "alias"),
    FlowKey("replication.policy.class", "replication_policy", "policy", absent=""),
    FlowKey("replication.policy.separator", "separator", absent="."),
    FlowKey("tasks.max", "tasks_max", "number", kinds=("source", "checkpoint")),  # one heartbeat task per flow
    FlowKey("topics", "topics", "regexes", kinds=("source",), absent=".*"),
    FlowKey("topics.exclude", "topics_exclude", "regexes", kinds=("source",), always=NEVER_REPLICATED_TOPICS,
            absent=""),
    FlowKey("topics.blacklist", "topics_exclude", "regexes", kinds=()),  # MM2's older name
    FlowKey("refresh.topics.interval.seconds", "refresh_seconds", "number", kinds=("source",)),
    FlowKey("sync.topic.configs.enabled", "sync_topic_configs", "flag", kinds=("source",)),
    FlowKey("sync.topic.configs.interval.seconds", "config_sync_seconds", "number", kinds=("source",),
            overridable=True),
    FlowKey("sync.topic.acls.enabled", "sync_topic_acls", "flag", kinds=("source",)),
    FlowKey("groups", "groups", "regexes", kinds=("checkpoint",)),
    FlowKey("groups.exclude", "groups_exclude", "regexes", kinds=("checkpoint",), always=NEVER_REPLICATED_GROUPS),
    FlowKey("groups.blacklist", "groups_exclude", "regexes", kinds=()),  # MM2's older name
    FlowKey("refresh.groups.interval.seconds", "refresh_seconds", "number", kinds=("checkpoint",)),
    FlowKey("sync.group.offsets.enabled", "sync_group_offsets", "flag", kinds=("checkpoint",)),
    # A flow runs its heartbeat connector or not: mirrorstack never writes the switch.
    FlowKey("emit.heartbeats.enabled", "heartbeats", "flag", kinds=()),
)
KEYS = {k.key: k for k in FLOW_KEYS}


def written(flow: FlowDescription, *keys: str) -> dict[str, str]:
    """The flow's fields under these config keys, as its connectors hold them
    (every key's field is one of the description's)."""
    return {key: KEYS[key].write(getattr(flow, KEYS[key].field)) for key in keys}


def flow_fields(config: Mapping[str, str], fields: Iterable[str]) -> dict:
    """The flow's `fields` as a connector's config says them, from the keys
    mirrorstack writes (MM2's value where the config lacks one); a field
    neither says is left out."""
    out = {}
    for field in fields:
        keys = [k for k in FLOW_KEYS if k.field == field and k.kinds]
        present = next((k for k in keys if k.key in config), None)
        if present is not None:
            out[field] = present.read(config[present.key])
        elif (default := next((k for k in keys if k.absent is not None), None)) is not None:
            out[field] = default.read(default.absent)
    return out


def flow_description(config: Mapping[str, str], name: str | None = None) -> FlowDescription:
    """The flow a connector's config says (flow_fields: the keys mirrorstack
    writes, MM2's value where the config lacks one; a field neither says takes
    the description's default). `name`: the flow's, when known."""
    read = {field: tuple(value) if isinstance(value, list) else value
            for field, value in flow_fields(config, [f.name for f in dataclass_fields(FlowDescription)]).items()}
    source, target = read.pop("source", None), read.pop("target", None)
    return FlowDescription(name=name or f"{source}->{target}", source=source, target=target, **read)
