import time

import pytest
import requests

from mirrorstack.monitoring import metrics

pytestmark = pytest.mark.integration


def _series_names(url: str) -> set[str]:
    text = requests.get(url, timeout=10).text
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def test_jmx_exporter_serves_broker_and_connect_series(kafka_a, connect_b):
    for target in kafka_a.jmx_targets:
        names = _series_names(f"http://{target}/metrics")
        assert any(n.startswith("kafka_server_") for n in names), sorted(names)[:20]
    names = _series_names(f"http://{connect_b.jmx_targets[0]}/metrics")
    assert any(n.startswith("kafka_connect_") for n in names), sorted(names)[:20]
    assert metrics.WORKER_CONNECTORS in names  # the generated rules' name (components/monitoring/metrics.py)


def test_prometheus_scrapes_every_exporter_target_up(prometheus, kafka_a, connect_b):
    expected = set(kafka_a.jmx_targets) | set(connect_b.jmx_targets)
    deadline = time.monotonic() + 90
    up = {}
    while time.monotonic() < deadline:
        up = {r["metric"]["instance"]: r["value"][1] for r in prometheus.query("up")}
        if set(up) == expected and all(v == "1" for v in up.values()):
            break
        time.sleep(1)
    assert set(up) == expected
    assert all(v == "1" for v in up.values()), up
    # The static labels from the generated config arrive on the series.
    roles = {r["metric"]["instance"]: r["metric"]["role"] for r in prometheus.query("up")}
    assert {roles[t] for t in kafka_a.jmx_targets} == {"broker"}
    assert roles[connect_b.jmx_targets[0]] == "connect"
