"""Read a cluster's topic and consumer-group names, and its record size limits,
for the replication plan (components/plan/replication_plan.py), quickly: a preview never
waits more than LIVE_TIMEOUT seconds per request on a cluster that does not
answer (about 2 × LIVE_TIMEOUT per cluster at worst: topics, then groups; the
limits are read only from a cluster that answered).

Secured clusters are read with the same client settings the flows use: their
`${file:...}` references are resolved and the Java settings translated to
librdkafka's by the code the validation job uses too (components/mm2/client_settings.py),
so the plan and the job read a cluster the same way."""
from __future__ import annotations

from mirrorstack.mm2.client_settings import librdkafka_config, resolve_reference
from mirrorstack.plan.replication_plan import Live

LIVE_TIMEOUT = 5  # seconds


def librdkafka_settings(bootstrap: str, client_settings: dict[str, str]) -> tuple[dict | None, str | None]:
    """(confluent_kafka settings, None) or (None, why they cannot be had here).
    The reason names files and keys, never a value."""
    problems: list[str] = []
    resolved = {key: resolve_reference(str(value), key, problems)
                for key, value in client_settings.items()}
    if problems:  # e.g. the client files are written by `up` and this machine has none yet
        return None, "client settings not readable here: " + "; ".join(problems)
    conf = librdkafka_config(bootstrap, resolved)
    if conf is None:
        protocol = client_settings.get("security.protocol", "PLAINTEXT")
        return None, f"{protocol} client settings with no librdkafka equivalent (e.g. a JKS store)"
    return conf, None


def read_names(bootstrap: str, client_settings: dict[str, str] | None = None) -> Live:
    """The cluster's topics and groups, or Live(error=...) saying why not."""
    conf, why_not = librdkafka_settings(bootstrap, client_settings or {})
    if conf is None:
        return Live(error=why_not)
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**conf, "log_level": 0,  # no librdkafka lines in the preview
                         "socket.connection.setup.timeout.ms": LIVE_TIMEOUT * 1000,
                         "socket.timeout.ms": LIVE_TIMEOUT * 1000})
    try:
        metadata = admin.list_topics(timeout=LIVE_TIMEOUT)
        topics = sorted(metadata.topics)
        groups = admin.list_consumer_groups(request_timeout=LIVE_TIMEOUT).result(timeout=LIVE_TIMEOUT)
    except Exception:  # noqa: BLE001 (KafkaException, a future's timeout: the plan says it could not read)
        return Live(error=f"no answer from {bootstrap} within {LIVE_TIMEOUT}s")
    limits, default_limit = _record_limits(admin, topics, list(metadata.brokers))
    return Live(topics=topics, groups=sorted(g.group_id for g in groups.valid), limits=limits,
                default_limit=default_limit)


def _record_limits(admin, topics: list[str], brokers: list[int]) -> tuple[dict[str, int], int | None]:
    """Each topic's max.message.bytes where set on the topic, and the brokers' message.max.bytes
    (what every other topic takes). Nothing when a principal may not describe configs: the
    plan then just does not compare limits."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
    resources += [ConfigResource(ResourceType.BROKER, str(b)) for b in brokers[:1]]
    limits, default_limit = {}, None
    try:
        for resource, future in admin.describe_configs(resources, request_timeout=LIVE_TIMEOUT).items():
            configs = future.result(timeout=LIVE_TIMEOUT)
            if resource.restype == ResourceType.BROKER:
                default_limit = int(configs["message.max.bytes"].value)
            elif not configs["max.message.bytes"].is_default:
                limits[resource.name] = int(configs["max.message.bytes"].value)
    except Exception:  # noqa: BLE001 (no right to describe, a timeout: the limits stay unknown)
        return {}, None
    return limits, default_limit
