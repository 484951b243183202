"""Real services shared by the integration suite, started once per session.

Cluster `a`: 2 brokers with the JMX exporter (source side). Cluster `b`:
1 broker (target side) with a Connect worker group next to it, as MM2 wants.
They stop as soon as no test left in this process needs them: idle, they cost
13 % of a core (measured), for the rest of the session otherwise.
"""
from __future__ import annotations

import pytest

from tests.support.scheduling import SESSION_SERVICES, still_needed, unit_of
from tests.support.services import ConnectGroup, KafkaCluster, PrometheusServer

_running: list = []  # the session services started so far, in start order


def _run(service):
    """Start a service, yield it, always stop what was started (stop is idempotent)."""
    try:
        _running.append(service)
        yield service.start()
    finally:
        service.stop()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    if _running and unit_of(item.nodeid) == SESSION_SERVICES and not still_needed(item, nextitem):
        while _running:  # the last started first: Prometheus, Connect, then the clusters
            _running.pop().stop()


@pytest.fixture(scope="session")
def kafka_a(tmp_path_factory):
    yield from _run(KafkaCluster("a", tmp_path_factory.mktemp("kafka-a"), brokers=2, jmx=True))


@pytest.fixture(scope="session")
def kafka_b(tmp_path_factory):
    yield from _run(KafkaCluster("b", tmp_path_factory.mktemp("kafka-b"), brokers=1))


@pytest.fixture(scope="session")
def connect_b(tmp_path_factory, kafka_b):
    yield from _run(ConnectGroup("b", tmp_path_factory.mktemp("connect-b"), kafka_b, jmx=True))


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory, kafka_a, connect_b):
    jobs = {"kafka-a": kafka_a.jmx_targets, "connect-b": connect_b.jmx_targets}
    labels = {"kafka-a": {"cluster": "a", "role": "broker"},
              "connect-b": {"cluster": "b", "role": "connect"}}
    yield from _run(PrometheusServer(tmp_path_factory.mktemp("prometheus"), jobs, labels=labels))
