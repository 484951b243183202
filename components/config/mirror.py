"""The MirrorMaker 2 connector trio of one flow: source, checkpoint, heartbeat.

Pure: takes the flow (components.model.Flow), its replication factor and the
two clusters' client settings, returns {connector name: config}. Every value
is a string (Connect wants strings; Pulumi would turn numbers into floats).
"""
from __future__ import annotations

from collections.abc import Mapping

from components.config.connect import BYTE_ARRAY_CONVERTER

MIRROR_PACKAGE = "org.apache.kafka.connect.mirror"
SOURCE, CHECKPOINT, HEARTBEAT = "MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector"
POLICY_CLASSES = {
    "default": f"{MIRROR_PACKAGE}.DefaultReplicationPolicy",
    "identity": f"{MIRROR_PACKAGE}.IdentityReplicationPolicy",
}


def connector_name(flow_name: str, kind: str) -> str:
    """`us->central.MirrorSourceConnector`: the flow, then MM2's own class name."""
    return f"{flow_name}.{kind}"


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _client_settings(prefix: str, bootstrap: str, client: Mapping[str, str]) -> dict[str, str]:
    settings = {f"{prefix}.bootstrap.servers": bootstrap}
    settings.update({f"{prefix}.{key}": value for key, value in client.items()})
    return settings


def mirror_connector_configs(
    flow, *, replication_factor: int,
    source_bootstrap: str, target_bootstrap: str,
    source_client: Mapping[str, str] | None = None, target_client: Mapping[str, str] | None = None,
) -> dict[str, dict[str, str]]:
    """Configs for the connectors this flow enables (source always; checkpoint
    and heartbeat when switched on), in that order."""
    rf = str(replication_factor)
    common = {
        "source.cluster.alias": flow.source,
        "target.cluster.alias": flow.target,
        **_client_settings("source.cluster", source_bootstrap, source_client or {}),
        **_client_settings("target.cluster", target_bootstrap, target_client or {}),
        "key.converter": BYTE_ARRAY_CONVERTER,
        "value.converter": BYTE_ARRAY_CONVERTER,
        "header.converter": BYTE_ARRAY_CONVERTER,
        "replication.policy.class": POLICY_CLASSES[flow.replication_policy],
        "replication.policy.separator": flow.separator,
        # Offset syncs on the target: MM2 needs no write access to the source.
        "offset-syncs.topic.location": "target",
        "offset-syncs.topic.replication.factor": rf,
    }
    source = {
        "connector.class": f"{MIRROR_PACKAGE}.{SOURCE}",
        **common,
        "tasks.max": str(flow.tasks_max),
        "topics": ",".join(flow.topics),
        "replication.factor": rf,
        "sync.topic.configs.enabled": _flag(flow.sync_topic_configs),
        "sync.topic.acls.enabled": _flag(flow.sync_topic_acls),
    }
    if flow.topics_exclude:
        source["topics.exclude"] = ",".join(flow.topics_exclude)
    if getattr(flow, "exactly_once", False):  # KIP-618; the workers enable exactly.once.source.support
        source["exactly.once.support"] = "required"
        source["source.consumer.isolation.level"] = "read_committed"  # never copy aborted records
    configs = {connector_name(flow.name, SOURCE): {**source, **flow.overrides.source}}

    if flow.checkpoints:
        checkpoint = {
            "connector.class": f"{MIRROR_PACKAGE}.{CHECKPOINT}",
            **common,
            "tasks.max": str(flow.tasks_max),
            "groups": ",".join(flow.groups),
            "emit.checkpoints.enabled": "true",
            "sync.group.offsets.enabled": _flag(flow.sync_group_offsets),
            "checkpoints.topic.replication.factor": rf,
        }
        if flow.groups_exclude:
            checkpoint["groups.exclude"] = ",".join(flow.groups_exclude)
        configs[connector_name(flow.name, CHECKPOINT)] = {**checkpoint, **flow.overrides.checkpoint}

    if flow.heartbeats:
        heartbeat = {
            "connector.class": f"{MIRROR_PACKAGE}.{HEARTBEAT}",
            **common,
            "tasks.max": "1",  # one heartbeat stream per flow
            "heartbeats.topic.replication.factor": rf,
        }
        configs[connector_name(flow.name, HEARTBEAT)] = {**heartbeat, **flow.overrides.heartbeat}
    return configs


def connector_names(flow) -> list[str]:
    """The connectors a flow runs: source always, checkpoint and heartbeat when on."""
    kinds = [SOURCE, *[CHECKPOINT] * flow.checkpoints, *[HEARTBEAT] * flow.heartbeats]
    return [connector_name(flow.name, kind) for kind in kinds]
