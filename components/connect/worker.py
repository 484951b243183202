"""Kafka Connect distributed worker properties (the runtime MirrorMaker 2 runs in)."""
from __future__ import annotations

from collections.abc import Mapping

BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"
OFFSET_FLUSH_INTERVAL_MS = "5000"
OFFSET_FLUSH_TIMEOUT_MS = "5000"  # Kafka's default, stated: the graceful stop below must exceed it
TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS = "10000"
SCHEDULED_REBALANCE_MAX_DELAY_MS = "10000"


def worker_defaults() -> dict[str, str]:
    """Worker settings where Kafka's defaults do not fit replication (docs/measurements.md: Replication speed)."""
    return {
        # Source offsets committed every 5 s, not 60 s: a crashed worker's tasks re-copy
        # at most 5 s of records (at-least-once duplicates), not a minute's.
        "offset.flush.interval.ms": OFFSET_FLUSH_INTERVAL_MS,
        # A stopping task first waits (up to offset.flush.timeout.ms) for the records it sent,
        # then commits their offsets. Kafka gives the whole stop 5 s, no more than that wait:
        # a task not stopped by then is cancelled and skips its final commit, and whoever
        # runs it next re-copies everything since its last periodic commit (a planned roll
        # duplicated records on a loaded host). The platforms' stop grace covers two such
        # waits (connectors, then tasks): platforms/base.py STOP_GRACE_SECONDS.
        "offset.flush.timeout.ms": OFFSET_FLUSH_TIMEOUT_MS,
        "task.shutdown.graceful.timeout.ms": TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS,
        # Two things at once (Kafka's WorkerGroupMember passes it to its coordinator as both):
        # how long a departed worker's connectors and tasks stay UNASSIGNED in case it returns,
        # and how long a worker that lost its group coordinator keeps its tasks before it stops
        # them all. Kafka's 5 minutes held a rolled worker's connector UNASSIGNED past the roll's
        # 180 s health wait (a suite run), failing `up`; at 0 a worker that lost its coordinator
        # (a roll of the brokers the workers bootstrap to) stopped all its tasks at once, to
        # start them again from their last commit (benchmarks/roll_duplicates.py). 10 s
        # outlasts a coordinator's move in a planned roll and adds at most 10 s to a rolled
        # worker's step.
        "scheduled.rebalance.max.delay.ms": SCHEDULED_REBALANCE_MAX_DELAY_MS,
    }


def worker_properties(
    group_id: str, *, bootstrap_servers: str, host: str, rest_port: int,
    kafka_broker_count: int, listen_host: str | None = None,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """One worker of the group `group_id`. Its config/offset/status topics live
    on the cluster it bootstraps to, replicated as far as that cluster allows."""
    rf = str(min(3, kafka_broker_count))
    props = {
        "bootstrap.servers": bootstrap_servers,
        "group.id": group_id,
        "key.converter": BYTE_ARRAY_CONVERTER,
        "value.converter": BYTE_ARRAY_CONVERTER,
        "config.storage.topic": f"{group_id}-configs",
        "offset.storage.topic": f"{group_id}-offsets",
        "status.storage.topic": f"{group_id}-status",
        "config.storage.replication.factor": rf,
        "offset.storage.replication.factor": rf,
        "status.storage.replication.factor": rf,
        "listeners": f"http://{listen_host or host}:{rest_port}",
        "rest.advertised.host.name": host,
        "rest.advertised.port": str(rest_port),
        # Every plugin a worker here runs (MM2's connectors, Kafka's converters) ships a
        # ServiceLoader manifest: the default hybrid scan also reflects over the whole
        # classpath, for nothing (measured: 7.1 s of a worker's start on a loaded host, 0.3 s without).
        "plugin.discovery": "service_load",
        **worker_defaults(),
    }
    props.update(overrides or {})
    return props
