"""Kafka Connect distributed worker properties (the runtime MirrorMaker 2 runs in)."""
from __future__ import annotations

from collections.abc import Mapping

BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"


def worker_defaults() -> dict[str, str]:
    """Worker settings where Kafka's defaults do not fit replication (docs/measurements.md: Replication speed)."""
    return {
        # Source offsets committed every 10 s, not 60 s: a crashed worker's tasks re-copy
        # about 10 s of records (at-least-once duplicates), not a minute's.
        "offset.flush.interval.ms": "10000",
        # A departed worker's connectors and tasks are reassigned at once, not held UNASSIGNED
        # for up to Kafka's 5 minutes in case it returns: a rolled worker's connector stayed
        # UNASSIGNED past the roll's 180 s health wait (a suite run), failing `up`; mirrorstack
        # rolls one worker at a time, so the churn the delay saves is one rebalance.
        "scheduled.rebalance.max.delay.ms": "0",
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
