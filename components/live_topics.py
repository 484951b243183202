"""Read a cluster's topic and consumer-group names for the replication plan
(components/config/plan.py), quickly: a preview never waits more than
LIVE_TIMEOUT seconds per request on a cluster that does not answer (about
2 × LIVE_TIMEOUT per cluster at worst: topics, then groups)."""
from __future__ import annotations

from components.config.plan import Live

LIVE_TIMEOUT = 5  # seconds


def read_names(bootstrap: str, client_settings: dict[str, str] | None = None) -> Live:
    """The cluster's topics and groups, or Live(error=...) saying why not."""
    settings = client_settings or {}
    if settings.get("security.protocol", "PLAINTEXT") != "PLAINTEXT" or \
            any("${" in str(v) for v in settings.values()):
        # Java client settings (keystores, ${file:} references) have no librdkafka equivalent here.
        return Live(error=f"{settings.get('security.protocol')} listener: the plan reads plaintext listeners only")
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0,  # no librdkafka lines in the preview
                         "socket.connection.setup.timeout.ms": LIVE_TIMEOUT * 1000,
                         "socket.timeout.ms": LIVE_TIMEOUT * 1000})
    try:
        topics = sorted(admin.list_topics(timeout=LIVE_TIMEOUT).topics)
        groups = admin.list_consumer_groups(request_timeout=LIVE_TIMEOUT).result(timeout=LIVE_TIMEOUT)
        return Live(topics=topics, groups=sorted(g.group_id for g in groups.valid))
    except Exception:  # noqa: BLE001 (KafkaException, a future's timeout: the plan says it could not read)
        return Live(error=f"no answer from {bootstrap} within {LIVE_TIMEOUT}s")
