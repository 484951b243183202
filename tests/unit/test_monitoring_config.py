"""The monitoring generators: JMX exporter rules, prometheus.yml, alert rules
(both checked by the real promtool), Grafana provisioning, and the model's
`monitoring` section. Series names against a live exporter: tests/integration."""
from __future__ import annotations

import re

import pytest
import yaml

from mirrorstack.monitoring import metrics
from mirrorstack.monitoring.alerts import alert_rules, alert_rules_file
from mirrorstack.monitoring.grafana import DATASOURCE_UID, grafana_files
from mirrorstack.monitoring.jmx import jmx_exporter_config
from mirrorstack.monitoring.prometheus import prometheus_config
from mirrorstack.platforms.descriptions import ScrapeTarget
from mirrorstack.model.spec import TopologyError, load_topology
from tests.support.promtool import promtool

AGGREGATION = {"clusters": {"us": {}, "uk": {}, "central": {}},
               "flows": [{"sources": ["us", "uk"], "target": "central", "topics": ["orders", "clicks.*"],
                          "topics_exclude": ["clicks\\.tmp"], "replication_policy": "identity"}],
               "monitoring": {}}


def test_jmx_rules_cover_kafka4_mm2_beans_with_the_source_tag():
    config = yaml.safe_load(jmx_exporter_config())
    assert config["lowercaseOutputName"] is True
    patterns = [r["pattern"] for r in config["rules"]]
    assert not any(p in (".*", "(.*)") for p in patterns)  # no catch-all: ~1 MB per scrape
    mm2 = [p for p in patterns if p.startswith("kafka.connect.mirror<type=MirrorSourceConnector")]
    assert mm2 and all("source=(.+), target=(.+), topic=(.+), partition=" in p for p in mm2)
    # each rule's pattern is a valid Java-compatible regex and the connector names may be quoted
    bean = 'kafka.connect<type=connector-task-metrics, connector="us->central.MirrorSourceConnector", task=0><>status: failed'
    rule = next(r for r in config["rules"] if r["name"] == "kafka_connect_task_status")
    assert re.fullmatch(rule["pattern"], bean).groups() == ("us->central.MirrorSourceConnector", "0", "failed")
    counters = {r["name"] for r in config["rules"] if r["type"] == "COUNTER"}
    assert "kafka_connect_mirror_source_connector_$5" in counters  # → ..._record_count_total (metrics.MM2_RECORDS)
    assert metrics.MM2_RECORDS.endswith("_total")


def test_the_exporter_reads_only_the_mbeans_a_rule_can_match():
    """includeObjectNames: every rule's MBeans are included (a missing one would drop its series
    silently), and nothing else (the exporter would read every MBean on each scrape)."""
    config = yaml.safe_load(jmx_exporter_config())
    included = config["includeObjectNames"]
    assert len(included) == len(set(included)) == 9
    samples = ['kafka.connect.mirror<type=MirrorSourceConnector, source=us, target=central, topic=orders, partition=0>',
               'kafka.connect<type=connector-task-metrics, connector="us->central.MirrorSourceConnector", task=0>',
               "kafka.connect<type=connect-worker-metrics>", "kafka.server<type=ReplicaManager, name=LeaderCount>",
               "kafka.server<type=BrokerTopicMetrics, name=MessagesInPerSec, topic=orders>",
               "kafka.controller<type=KafkaController, name=ActiveControllerCount>"]
    for bean in samples:  # each names a (domain, type) that is included, as JMX matches `domain:type=x,*`
        domain, kind = re.match(r"([^<]+)<type=([A-Za-z-]+)", bean).groups()
        assert f"{domain}:type={kind},*" in included, bean
    for rule in config["rules"]:
        domain, kind = re.match(r"([^<]+)<type=([A-Za-z-]+)", rule["pattern"]).groups()
        assert f"{domain}:type={kind},*" in included, rule["pattern"]
    assert not any(name.startswith(("java.lang", "kafka.log", "kafka.network")) for name in included)


def test_prometheus_config_jobs_labels_flow_relabel_and_promtool(tmp_path):
    targets = [ScrapeTarget("kafka-us", "127.0.0.1:1", {"cluster": "us", "role": "controller"}),
               ScrapeTarget("kafka-us", "127.0.0.1:2", {"cluster": "us", "role": "broker"}),
               ScrapeTarget("kafka-us", "127.0.0.1:3", {"cluster": "us", "role": "broker"}),
               ScrapeTarget("connect-central", "127.0.0.1:4", {"cluster": "central", "role": "connect",
                                                                 "connect": "central"})]
    (tmp_path / "alerts.yml").write_text(alert_rules_file(alert_rules(load_topology(AGGREGATION).flows)))
    text = prometheus_config(targets, scrape_interval="5s", rule_files=[str(tmp_path / "alerts.yml")])
    (tmp_path / "prometheus.yml").write_text(text)
    check = promtool("check", "config", str(tmp_path / "prometheus.yml"))
    assert check.returncode == 0, check.stdout + check.stderr
    parsed = yaml.safe_load(text)
    kafka, connect = parsed["scrape_configs"]
    assert kafka["job_name"] == "kafka-us" and [s["labels"]["role"] for s in kafka["static_configs"]] == [
        "controller", "broker"]
    assert kafka["static_configs"][1]["targets"] == ["127.0.0.1:2", "127.0.0.1:3"]
    assert "metric_relabel_configs" not in kafka
    (relabel,) = connect["metric_relabel_configs"]
    assert relabel["source_labels"] == ["source", "target"] and relabel["target_label"] == "flow"
    assert re.fullmatch(relabel["regex"], "us->central") and not re.fullmatch(relabel["regex"], "->")


def test_alert_rules_pass_promtool_and_name_each_flow(tmp_path):
    rules = alert_rules(load_topology(AGGREGATION).flows, latency_threshold_ms=5000, stalled_minutes=3,
                        failed_for="30s")
    (tmp_path / "alerts.yml").write_text(alert_rules_file(rules))
    check = promtool("check", "rules", str(tmp_path / "alerts.yml"))
    assert check.returncode == 0, check.stdout + check.stderr
    names = [r.name for r in rules]
    assert {"MirrorConnectorFailed", "MirrorTaskFailed", "MirrorReplicationLatencyHigh",
            "MirrorReplicationStalled", "ConnectWorkerDown", "MirrorConnectorRestartCapReached",
            "ConnectSupervisorDown"} == set(names)
    stalled = [r for r in rules if r.name == "MirrorReplicationStalled"]
    assert [r.labels["flow"] for r in stalled] == ["us->central", "uk->central"]
    assert 'cluster="us", topic=~"orders|clicks.*", topic!~"clicks\\\\.tmp"' in stalled[0].expr
    assert "[3m]" in stalled[0].expr
    latency = next(r for r in rules if r.name == "MirrorReplicationLatencyHigh")
    assert latency.expr.endswith("> 5000")
    assert next(r for r in rules if r.name == "MirrorTaskFailed").for_ == "30s"
    # every base is also valid PromQL on its own (the integration test queries them)
    bases = {"groups": [{"name": "bases", "rules": [{"record": f"base:{i}", "expr": r.base}
                                                    for i, r in enumerate(rules)]}]}
    (tmp_path / "bases.yml").write_text(yaml.safe_dump(bases))
    check = promtool("check", "rules", str(tmp_path / "bases.yml"))
    assert check.returncode == 0, check.stdout + check.stderr


def test_grafana_provisioning_points_at_prometheus_and_the_dashboards():
    files = grafana_files("http://prometheus:9090", "/var/lib/grafana/dashboards")
    (ds,) = yaml.safe_load(files["provisioning/datasources/prometheus.yaml"])["datasources"]
    assert (ds["type"], ds["url"], ds["uid"], ds["isDefault"]) == ("prometheus", "http://prometheus:9090",
                                                                   DATASOURCE_UID, True)
    (provider,) = yaml.safe_load(files["provisioning/dashboards/mirrorstack.yaml"])["providers"]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    assert {k for k in files if k.startswith("dashboards/")} == {
        "dashboards/mirrorstack-overview.json", "dashboards/mirrorstack-flow.json"}


@pytest.mark.parametrize("monitoring, expected", [
    ({"kafka_ui": True}, "monitoring.kafka_ui: runs as a container, not on the local platform"),
    ({"kafka_exporter": True}, "monitoring.kafka_exporter: runs as a container"),
    ({"scrape_interval": "fast"}, "monitoring.scrape_interval"),
    ({"latency_threshold_ms": 0}, "monitoring.latency_threshold_ms"),
    ({"grafana_password": "x"}, "monitoring.grafana_password"),  # secrets never in the stack file
])
def test_bad_monitoring_settings_name_the_field(monitoring, expected):
    with pytest.raises(TopologyError) as info:
        load_topology({**AGGREGATION, "monitoring": monitoring})
    assert any(p.startswith(expected) for p in info.value.problems), info.value.problems
