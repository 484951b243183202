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


def kafka_brokers_ready(bootstrap_servers: str, expected_brokers: int, timeout: float = 3.0) -> bool:
    """True when the cluster answers a metadata request listing all its brokers."""
    from confluent_kafka.admin import AdminClient  # heavy import, only when used

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0,
                         "socket.connection.setup.timeout.ms": int(timeout * 1000)})
    metadata = admin.list_topics(timeout=timeout)
    return len(metadata.brokers) >= expected_brokers
