"""Monitoring: Prometheus scraping every JMX exporter of the stack with the
replication alert rules, and Grafana with the generated dashboards (a server
on docker/kubernetes; on local, the provisioning files only). Optional Kafka UI
and kafka-exporter on docker/kubernetes."""
from __future__ import annotations

import pulumi

from components.config.alerts import alert_rules, alert_rules_file
from components.config.prometheus import ScrapeTarget, prometheus_config


class Monitoring(pulumi.ComponentResource):
    """Args: the validated `topology` (its `monitoring` section), `clusters` and
    `connect` (components started with `metrics=True`), the `platform`, and
    `grafana_password` (a secret; docker/kubernetes). Outputs: `prometheus_url`,
    `grafana_url` (None on local), `alert_rules` (names), `dashboards` (local: the
    generated files)."""

    def __init__(self, name: str, topology, clusters: dict, connect: dict, platform, *,
                 grafana_password: pulumi.Input[str] | None = None, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mirrorstack:monitoring:Monitoring", name, None, opts)
        settings = topology.monitoring
        child = pulumi.ResourceOptions(parent=self)
        targets: list[ScrapeTarget] = [t for c in [*clusters.values(), *connect.values()] for t in c.scrape_targets]
        targets += platform.run_extras(topology, clusters, opts=child)  # kafka-exporter targets, if any
        rules = alert_rules(topology.flows, latency_threshold_ms=settings.latency_threshold_ms,
                            stalled_minutes=settings.stalled_minutes, failed_for=settings.failed_for)
        files = {"prometheus.yml": prometheus_config(targets, scrape_interval=settings.scrape_interval,
                                                     rule_files=["{dir}/alerts.yml"]),
                 "alerts.yml": alert_rules_file(rules)}
        self.prometheus, self.prometheus_url = platform.run_prometheus("prometheus", files=files, opts=child)
        self.alert_rules = sorted({r.name for r in rules})
        self.grafana, self.grafana_url = None, None
        if settings.grafana or platform.name == "local":
            self.grafana, self.grafana_url = platform.run_grafana(
                "grafana", prometheus=self.prometheus_url, admin_password=grafana_password,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.prometheus]))
        self.register_outputs({"prometheus_url": self.prometheus_url, "grafana_url": self.grafana_url,
                               "alert_rules": self.alert_rules})
