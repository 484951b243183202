"""Health checks that ask the real service, not just whether a port is open."""
from __future__ import annotations

import socket

import requests


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def http_ok(url: str, timeout: float = 2.0) -> bool:
    return requests.get(url, timeout=timeout).status_code == 200


def kafka_brokers_ready(bootstrap_servers: str, expected_brokers: int, timeout: float = 3.0,
                        client: dict[str, str] | None = None) -> bool:
    """True when the cluster answers a metadata request listing all its brokers.
    `client`: librdkafka settings (TLS file paths of a secured listener)."""
    from confluent_kafka.admin import AdminClient  # heavy import, only when used

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0,
                         "socket.connection.setup.timeout.ms": int(timeout * 1000), **(client or {})})
    metadata = admin.list_topics(timeout=timeout)
    return len(metadata.brokers) >= expected_brokers


MIRROR_CONNECTOR_CLASSES = (
    "org.apache.kafka.connect.mirror.MirrorSourceConnector",
    "org.apache.kafka.connect.mirror.MirrorCheckpointConnector",
    "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
)


def rest_credentials(credentials_file: str) -> tuple[str, str]:
    """(user, password) from a Connect basic-auth credentials file (`user: password`)."""
    user, _, password = open(credentials_file).read().strip().splitlines()[0].partition(":")
    return user.strip(), password.strip()


def connect_ready(rest_url: str, timeout: float = 5.0, auth_file: str | None = None) -> bool:
    """Connect's REST API answers and lists the three MirrorMaker 2 connectors
    (plugin scanning is the slow part of a worker's start)."""
    auth = rest_credentials(auth_file) if auth_file else None
    plugins = requests.get(f"{rest_url}/connector-plugins", timeout=timeout, auth=auth).json()
    return set(MIRROR_CONNECTOR_CLASSES) <= {p["class"] for p in plugins}


def own_address(spec: dict) -> tuple[str, int] | None:
    """The address a service's own health check probes (tcp, http, connect);
    None for a Kafka check, which asks the whole cluster's bootstrap servers."""
    if spec["kind"] == "tcp":
        return spec["host"], int(spec["port"])
    if spec["kind"] in ("http", "connect"):
        from urllib.parse import urlsplit
        url = urlsplit(spec["url"])
        return url.hostname, url.port or (443 if url.scheme == "https" else 80)
    return None


def check(spec: dict) -> bool:
    """Run a health check described as data (what a service resource stores)."""
    kind = spec["kind"]
    if kind == "tcp":
        return port_open(spec["host"], int(spec["port"]))
    if kind == "http":
        return http_ok(spec["url"])
    if kind == "kafka":
        client = {k.removeprefix("client."): v for k, v in spec.items() if k.startswith("client.")}
        return kafka_brokers_ready(spec["bootstrap"], int(spec.get("brokers", "1")), client=client)
    if kind == "connect":
        return connect_ready(spec["url"], auth_file=spec.get("auth_file"))
    raise ValueError(f"unknown health check kind {kind!r}")
