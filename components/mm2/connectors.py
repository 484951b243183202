"""MirrorMaker 2's connectors by name: the three kinds a flow runs, their
classes, the replication policies' classes, and how mirrorstack names a
flow's connectors and marks the ones a stack owns. Standard library only."""
from __future__ import annotations

MIRROR_PACKAGE = "org.apache.kafka.connect.mirror"
SOURCE, CHECKPOINT, HEARTBEAT = "MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector"
KINDS = {"source": SOURCE, "checkpoint": CHECKPOINT, "heartbeat": HEARTBEAT}
POLICY_CLASSES = {
    "default": f"{MIRROR_PACKAGE}.DefaultReplicationPolicy",
    "identity": f"{MIRROR_PACKAGE}.IdentityReplicationPolicy",
}
# Which stack a connector belongs to: a key Connect keeps with the config and MM2
# ignores. A connector without it was made outside mirrorstack (mm2.sh).
OWNER_KEY = "mirrorstack.stack"
# The task producer's buffer.memory default: a larger record cannot be sent at all.
DEFAULT_MAX_RECORD_BYTES = 32 * 2**20


def connector_name(flow_name: str, kind: str) -> str:
    """`us->central.MirrorSourceConnector`: the flow, then MM2's own class name."""
    return f"{flow_name}.{kind}"


def connector_names(flow) -> list[str]:
    """The connectors a flow runs: source always, checkpoint and heartbeat when on."""
    kinds = ["source", *["checkpoint"] * flow.checkpoints, *["heartbeat"] * flow.heartbeats]
    return [flow.connector_name(kind) for kind in kinds]
