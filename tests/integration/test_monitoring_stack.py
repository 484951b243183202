"""Monitoring through the real engine on the local platform: the active-passive
stack with JMX exporters on every JVM, Prometheus with the generated config and
alert rules, and the generated dashboards — against a flow replicating real
records, then a broken task that must fire its alert."""
from __future__ import annotations

import json
import time
from urllib.parse import quote

import pytest
import requests

from mirrorstack.monitoring.alerts import alert_rules
from mirrorstack.monitoring.dashboards import concrete_query, dashboard_queries
from mirrorstack.model.spec import load_topology
from tests.support.kafka_clients import consume_group, create_topic, produce, wait_for_count
from tests.support.leftovers import leftover_processes
from tests.support.stacks import stack_project

pytestmark = pytest.mark.integration

FLOW = "primary->standby"
SOURCE_CONNECTOR = f"{FLOW}.MirrorSourceConnector"


def query(prometheus: str, expr: str) -> list[dict]:
    reply = requests.get(f"{prometheus}/api/v1/query", params={"query": expr}, timeout=10)
    reply.raise_for_status()
    return reply.json()["data"]["result"]


def wait_until(what: str, check, timeout: float = 120, every: float = 2):
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"{what}: not within {timeout:.0f}s (last: {last!r})")


def test_monitoring_sees_real_replication_and_fires_the_failed_task_alert(tmp_path):
    with stack_project("active-passive", tmp_path) as project:
        for key, value in (("scrape_interval", "2s"), ("failed_for", "10s")):
            project.run("config", "set", "--path", f"mirrorstack:topology.monitoring.{key}", value)
        project.run("up", "--yes", "--skip-preview", timeout=900)
        out = project.outputs()
        prometheus, primary, standby = out["prometheus_url"], out["clusters"]["primary"], out["clusters"]["standby"]
        assert out["alert_rules"] == ["ConnectWorkerDown", "MirrorConnectorFailed", "MirrorReplicationLatencyHigh",
                                      "MirrorReplicationStalled", "MirrorTaskFailed"]
        assert "grafana_url" not in out  # local: dashboards as files only
        dashboards = sorted(project.local_dir.glob("grafana/dashboards/*.json"))
        assert [d.name for d in dashboards] == ["mirrorstack-flow.json", "mirrorstack-overview.json"]

        # real records through the flow, and a consumer group for the checkpoint series
        create_topic(primary, "orders", 2, 1)
        produce(primary, "orders", 1000)
        assert len(wait_for_count(standby, "primary.orders", 1000)) == 1000
        consume_group(primary, "orders", "app-billing", 300)
        produce(primary, "orders", 200)  # after the group committed: rates and latencies are fresh

        # every exporter is a target, and up: 2 clusters x (controller + broker) + 1 Connect worker
        ups = wait_until("5 targets up", lambda: (lambda r: r if len(r) == 5 and all(x["value"][1] == "1" for x in r)
                                                  else None)(query(prometheus, "up")))
        assert sorted((u["metric"]["cluster"], u["metric"]["role"]) for u in ups) == [
            ("primary", "broker"), ("primary", "controller"), ("standby", "broker"), ("standby", "connect"),
            ("standby", "controller")]

        # EVERY expression of the dashboards and every alert's measured base returns a series
        topology = _topology(project)
        exprs = {concrete_query(q) for d in dashboards for q in dashboard_queries(json.loads(d.read_text()))}
        # (the reverse flow is stopped while primary is active: it replicates nothing to measure)
        exprs |= {r.base for r in alert_rules([f for f in topology.flows if topology.flow_state(f) == "running"])}
        empty = set(exprs)
        deadline = time.monotonic() + 150
        while empty and time.monotonic() < deadline:
            empty = {e for e in empty if not query(prometheus, e)}
            time.sleep(3)
        assert not empty, f"{len(empty)} of {len(exprs)} expressions return no series:\n" + "\n".join(sorted(empty))

        # the latency and record-rate series name the flow's source, target and topic
        for name in ("kafka_connect_mirror_source_connector_replication_latency_ms_max",
                     "kafka_connect_mirror_source_connector_record_rate"):
            labels = [s["metric"] for s in query(prometheus, name)]
            assert labels and all((m["source"], m["target"], m["topic"], m["flow"]) ==
                                  ("primary", "standby", "primary.orders", FLOW) for m in labels), labels

        # break the source tasks' config out of band: MirrorTaskFailed fires within its `for`
        connect = out["connect"]["standby"]
        url = f"{connect}/connectors/{quote(SOURCE_CONNECTOR, safe='')}"
        config = requests.get(f"{url}/config", timeout=10).json()
        requests.put(f"{url}/config", json={**config, "source.consumer.max.poll.records": "0"},
                     timeout=30).raise_for_status()
        broke = time.monotonic()

        def firing():
            alerts = requests.get(f"{prometheus}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
            return [a for a in alerts if a["labels"]["alertname"] == "MirrorTaskFailed" and a["state"] == "firing"]
        (alert,) = wait_until("MirrorTaskFailed firing", firing, timeout=90)
        assert alert["labels"]["connector"] == SOURCE_CONNECTOR and alert["labels"]["severity"] == "critical"
        assert float(alert["value"]) >= 1
        print(f"MirrorTaskFailed fired {time.monotonic() - broke:.0f}s after the config broke")

        project.run("destroy", "--yes", "--skip-preview", timeout=600)
        assert leftover_processes(str(project.local_dir)) == []


def _topology(project):
    """The stack's topology as `pulumi config` holds it (with the test's overrides)."""
    raw = json.loads(project.run("config", "--json").stdout)["mirrorstack:topology"]
    return load_topology(raw.get("objectValue") or json.loads(raw["value"]))
