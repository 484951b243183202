"""The MirrorMaker 2 connector trio of one flow: source, checkpoint, heartbeat.

Pure: takes the flow's description (mirrorstack.mm2.flows.FlowDescription, which
the model's Flow.description() fills), its replication factor and the two
clusters' client settings, returns {connector name: config}. Every value
is a string (Connect wants strings; Pulumi would turn numbers into floats).
"""
from __future__ import annotations

from collections.abc import Mapping

from mirrorstack.connect.worker import BYTE_ARRAY_CONVERTER
from mirrorstack.mm2.connector_keys import KEYS, written
from mirrorstack.mm2.connectors import (CHECKPOINT, DEFAULT_MAX_RECORD_BYTES, HEARTBEAT, MIRROR_PACKAGE, OWNER_KEY,
                                        SOURCE, connector_names)
from mirrorstack.mm2.flows import FlowDescription

# Producer settings a push flow overrides, besides the target's client settings.
PRODUCER_OVERRIDE = "producer.override."


def topics_exclude(flow: FlowDescription) -> list[str]:
    """Everything a flow never replicates, as its source connector lists it: MM2's
    defaults, Connect's storage topics (mirrorstack.mm2.flows), then its own."""
    exclude = KEYS["topics.exclude"]
    return exclude.read(exclude.write(flow.topics_exclude))


def push_overrides(target_bootstrap: str, target_client: Mapping[str, str] | None) -> dict[str, str]:
    """Producer overrides that make a connector's task producer write to the
    target rather than to the Connect workers' own Kafka cluster (push)."""
    return {f"{PRODUCER_OVERRIDE}{key}": value
            for key, value in {"bootstrap.servers": target_bootstrap, **(target_client or {})}.items()}


def override_allowlist(configs: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The client settings these connectors override (`producer.override.x` → x),
    for a worker's Allowlist override policy."""
    prefixes = (PRODUCER_OVERRIDE, "consumer.override.", "admin.override.")
    return sorted({key.split(".override.", 1)[1] for config in configs.values() for key in config
                   if key.startswith(prefixes)})


def throughput_settings(flow: FlowDescription) -> dict[str, str]:
    """The source connector's speed settings (flow.throughput, flow.compression),
    each under the prefix that reaches its client: the data producer is the
    Connect worker's task producer (`producer.override.*`; MM2's
    `target.producer.*` does nothing in Connect mode), the records' consumer is
    MM2's (`source.consumer.*`)."""
    t = flow.throughput
    return {
        f"{PRODUCER_OVERRIDE}batch.size": str(t.batch_bytes),
        f"{PRODUCER_OVERRIDE}linger.ms": str(t.linger_ms),
        # Idempotence keeps order with up to 5 requests in flight; Connect's default is 1 in flight.
        f"{PRODUCER_OVERRIDE}enable.idempotence": "true",
        f"{PRODUCER_OVERRIDE}max.in.flight.requests.per.connection": str(t.in_flight),
        f"{PRODUCER_OVERRIDE}compression.type": flow.compression,
        # Kafka checks a record's uncompressed size against max.request.size before compressing: at its 1 MiB,
        # a record the source took compressed kills the task. The broker still checks the compressed batch.
        f"{PRODUCER_OVERRIDE}max.request.size": str(t.max_record_bytes),
        f"{PRODUCER_OVERRIDE}buffer.memory": str(max(t.max_record_bytes, DEFAULT_MAX_RECORD_BYTES)),
        "source.consumer.max.poll.records": str(t.poll_records),
        # The OS sizes TCP buffers (-1): Kafka's fixed 128 KB send / 64 KB receive buffers cap a
        # connection at one buffer per round trip (1.6 MB/s on a 40 ms link) whatever else is tuned.
        f"{PRODUCER_OVERRIDE}send.buffer.bytes": "-1",
        "source.consumer.receive.buffer.bytes": "-1",
    }


def _client_settings(prefix: str, bootstrap: str, client: Mapping[str, str]) -> dict[str, str]:
    settings = {f"{prefix}.bootstrap.servers": bootstrap}
    settings.update({f"{prefix}.{key}": value for key, value in client.items()})
    return settings


def mirror_connector_configs(
    flow: FlowDescription, *, replication_factor: int,
    source_bootstrap: str, target_bootstrap: str,
    source_client: Mapping[str, str] | None = None, target_client: Mapping[str, str] | None = None,
    owner: str | None = None, push: bool = False, offsets_topic: str | None = None,
    consumer_rack: str | None = None,
) -> dict[str, dict[str, str]]:
    """Configs for the connectors this flow enables (source always; checkpoint
    and heartbeat when switched on), in that order, under the flow's connector
    names. `owner`: the stack (OWNER_KEY). `push`: the Connect cluster's Kafka
    is not the target, so every connector produces to the target through
    producer overrides; an exactly-once source then keeps its offsets in
    `offsets_topic` on the target, in the same transactions as the records.
    `consumer_rack`: the rack (zone) of the worker running a source task, as
    a reference the worker resolves (`${env:...}`): the task's consumer then
    reads from the source broker in its own zone where one has a replica."""
    rf = str(replication_factor)
    # The flow's own fields under their keys (mirrorstack.mm2.connector_keys), in the order Connect shows them.
    common = {
        **written(flow, "source.cluster.alias", "target.cluster.alias"),
        **_client_settings("source.cluster", source_bootstrap, source_client or {}),
        **_client_settings("target.cluster", target_bootstrap, target_client or {}),
        "key.converter": BYTE_ARRAY_CONVERTER,
        "value.converter": BYTE_ARRAY_CONVERTER,
        "header.converter": BYTE_ARRAY_CONVERTER,
        **written(flow, "replication.policy.class", "replication.policy.separator"),
        # Offset syncs on the target: MM2 needs no write access to the source.
        "offset-syncs.topic.location": "target",
        "offset-syncs.topic.replication.factor": rf,
        **(push_overrides(target_bootstrap, target_client) if push else {}),
        **({OWNER_KEY: owner} if owner else {}),
    }
    source = {
        "connector.class": f"{MIRROR_PACKAGE}.{SOURCE}",
        **common,
        **written(flow, "tasks.max", "topics", "refresh.topics.interval.seconds"),
        "replication.factor": rf,
        **written(flow, "sync.topic.configs.enabled"),
        **(written(flow, "sync.topic.configs.interval.seconds")
           if flow.config_sync_seconds is not None and flow.sync_topic_configs else {}),
        **written(flow, "sync.topic.acls.enabled", "topics.exclude"),
        # MM2's consumer asks for its assigned topics' metadata with auto-creation on (the client's
        # default): a topic deleted on the source, still assigned to a task until the next topic
        # refresh, came back empty wherever the brokers auto-create (Kafka's default).
        "source.consumer.allow.auto.create.topics": "false",
        **throughput_settings(flow),
        **({"source.consumer.client.rack": consumer_rack} if consumer_rack else {}),
    }
    if flow.exactly_once:  # KIP-618; the workers enable exactly.once.source.support
        source["exactly.once.support"] = "required"
        source["source.consumer.isolation.level"] = "read_committed"  # never copy aborted records
        if push and offsets_topic:
            source["offsets.storage.topic"] = offsets_topic
    configs = {flow.connector_name("source"): {**source, **flow.overrides.for_kind("source")}}

    if flow.checkpoints:
        checkpoint = {
            "connector.class": f"{MIRROR_PACKAGE}.{CHECKPOINT}",
            **common,
            **written(flow, "tasks.max", "groups", "refresh.groups.interval.seconds"),
            "emit.checkpoints.enabled": "true",
            **written(flow, "sync.group.offsets.enabled"),
            "checkpoints.topic.replication.factor": rf,
            **written(flow, "groups.exclude"),
        }
        configs[flow.connector_name("checkpoint")] = {**checkpoint, **flow.overrides.for_kind("checkpoint")}

    if flow.heartbeats:
        heartbeat = {
            "connector.class": f"{MIRROR_PACKAGE}.{HEARTBEAT}",
            **common,
            "tasks.max": "1",  # one heartbeat stream per flow
            "heartbeats.topic.replication.factor": rf,
        }
        configs[flow.connector_name("heartbeat")] = {**heartbeat, **flow.overrides.for_kind("heartbeat")}
    return configs


def take_over_names(flow: FlowDescription) -> dict[str, str]:
    """{existing connector: the flow's connector that carries its offsets on},
    '' for a taken-over kind the flow does not run (it is only deleted)."""
    running = set(connector_names(flow))
    return {old: (flow.connector_name(kind) if flow.connector_name(kind) in running else "")
            for kind, old in flow.take_over.by_kind().items()}
