"""KRaft `server.properties` for one controller or broker node.

A cluster is one controller quorum plus brokers; single-broker clusters need
every internal topic's replication factor at 1, so those are derived from the
broker count here rather than left to Kafka's defaults of 3.
"""
from __future__ import annotations

from collections.abc import Mapping

from mirrorstack.properties import with_env_provider

CONTROLLER_LISTENER = "CONTROLLER"
BROKER_LISTENER = "PLAINTEXT"


def quorum_voters(controllers: Mapping[int, str]) -> str:
    """`controller.quorum.voters` from {node_id: "host:port"}."""
    return ",".join(f"{node_id}@{address}" for node_id, address in sorted(controllers.items()))


def internal_topic_settings(broker_count: int) -> dict[str, str]:
    rf = str(min(3, broker_count))
    min_isr = str(min(2, broker_count))
    return {
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": min_isr,
    }


def controller_properties(
    node_id: int, *, host: str, port: int, voters: str, log_dir: str, broker_count: int,
    listen_host: str | None = None, overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """`listen_host` is the interface to bind (containers: 0.0.0.0) when it
    differs from `host`, the name others reach the node by."""
    props = {
        "process.roles": "controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "listeners": f"{CONTROLLER_LISTENER}://{listen_host or host}:{port}",
        "controller.listener.names": CONTROLLER_LISTENER,
        "listener.security.protocol.map": f"{CONTROLLER_LISTENER}:PLAINTEXT",
        "log.dirs": log_dir,
        # In KRaft the controller creates topics, so this default is read there.
        "default.replication.factor": str(min(3, broker_count)),
    }
    props.update(overrides or {})
    return props


def broker_properties(
    node_id: int, *, host: str, port: int, voters: str, log_dir: str, broker_count: int,
    listen_host: str | None = None, overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    props = {
        "process.roles": "broker",
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "listeners": f"{BROKER_LISTENER}://{listen_host or host}:{port}",
        "advertised.listeners": f"{BROKER_LISTENER}://{host}:{port}",
        "inter.broker.listener.name": BROKER_LISTENER,
        "controller.listener.names": CONTROLLER_LISTENER,
        "listener.security.protocol.map": f"{BROKER_LISTENER}:PLAINTEXT,{CONTROLLER_LISTENER}:PLAINTEXT",
        "log.dirs": log_dir,
        **internal_topic_settings(broker_count),
    }
    props.update(overrides or {})
    return props


EXTERNAL_LISTENER = "EXTERNAL"
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def with_external_listener(props: Mapping[str, str], *, advertised: str, listen: str) -> dict[str, str]:
    """A broker's properties plus a plaintext EXTERNAL listener bound at
    `listen` and advertised as `advertised` ("host:port"; the host may be an
    `${env:...}` reference, resolved by the broker at start)."""
    out = dict(props)
    out["listeners"] += f",{EXTERNAL_LISTENER}://{listen}"
    out["advertised.listeners"] += f",{EXTERNAL_LISTENER}://{advertised}"
    out["listener.security.protocol.map"] += f",{EXTERNAL_LISTENER}:PLAINTEXT"
    return with_env_provider(out) if "${env:" in advertised else out


def with_rack(props: Mapping[str, str], rack: str) -> dict[str, str]:
    """A broker in `rack` (an `${env:...}` reference: the zone of its pod's
    node), serving consumers from the replica in their own rack (KIP-392),
    so a flow's consumer in a zone reads from the broker there."""
    out = {"broker.rack": rack, "replica.selector.class": RACK_AWARE_SELECTOR, **props}  # settings win
    return with_env_provider(out) if "${env:" in out["broker.rack"] else out
