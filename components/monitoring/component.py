"""Monitoring: Prometheus scraping every JMX exporter of the stack with the
replication alert rules, and Grafana with the generated dashboards (a server
on docker/kubernetes; on local, the provisioning files only). Optional Kafka UI
and kafka-exporter on docker/kubernetes."""
from __future__ import annotations

import functools

import pulumi

from mirrorstack import naming
from mirrorstack.model.capabilities import capabilities
from mirrorstack.monitoring.alerts import (
    alert_rules, alert_rules_file, certificate_expiry_records, certificate_rule, delivery_rules, drill_records,
    drill_rule,
)
from mirrorstack.monitoring.extras import run_extras
from mirrorstack.monitoring.grafana import grafana_files
from mirrorstack.monitoring.args import GrafanaArgs, MonitoringArgs, PrometheusArgs
from mirrorstack.monitoring.prometheus import prometheus_config
from mirrorstack.monitoring.servers import grafana_service, prometheus_service
from mirrorstack.secrets import GeneratedPassword


class Prometheus(pulumi.ComponentResource):
    """Built from PrometheusArgs: scrapes `targets` with the replication alert
    rules of `topology` (its `monitoring` settings), and, for the secured
    `clusters` (KafkaClusters), their certificates' expiries and renewal alert.
    Outputs: `url` (from this machine where it is published), `datasource_url`
    (as the stack's services reach it), `server` (the resource that runs it),
    `alert_rules` (names)."""

    def __init__(self, name: str, args: PrometheusArgs, opts: pulumi.ResourceOptions | None = None):
        naming.component(self, "mirrorstack:monitoring:Prometheus", name, opts)
        topology, targets, platform = args.topology, args.targets, args.platform
        settings = topology.monitoring
        rules = alert_rules(topology.flows, latency_threshold_ms=settings.latency_threshold_ms,
                            stalled_minutes=settings.stalled_minutes, failed_for=settings.failed_for)
        if topology.validates_continuously:  # its alert rules
            rules += delivery_rules(topology.validated_flows(),
                                    trigger_seconds=topology.validation.continuous.trigger_seconds)
        files = {"prometheus.yml": prometheus_config(targets, scrape_interval=settings.scrape_interval,
                                                     rule_files=["{dir}/alerts.yml"]),
                 "alerts.yml": alert_rules_file(rules)}
        secured = {alias: c for alias, c in args.clusters.items() if c.tls is not None}
        rules += [certificate_rule(alias, c.renew_before_days) for alias, c in secured.items()]
        drill = topology.failover.drill if topology.failover is not None else None
        if drill is not None:
            rules.append(drill_rule(drill.pass_within_days))
        if secured or drill is not None:  # constant series known once the certificates exist and the drill ran
            files["alerts.yml"] = pulumi.Output.all(
                certificates=pulumi.Output.all(**{a: c.tls.certificates for a, c in secured.items()}) if secured else {},
                drill=args.drill).apply(lambda known: alert_rules_file(rules, [
                    *(r for alias, summary in known["certificates"].items()
                      for r in certificate_expiry_records(alias, summary)),
                    *drill_records(known.get("drill"))]))
        ran = platform.run(prometheus_service(name, files, platform, capabilities(platform.name).runs_containers),
                           opts=pulumi.ResourceOptions(parent=self))
        self.server, self.url = ran.resource, ran.url
        # Where the stack's services (Grafana) reach it: in the platform's network, else `url`
        self.datasource_url = "http://%s:%d" % ran.address if ran.address is not None else ran.url
        self.alert_rules = sorted({r.name for r in rules})
        self.register_outputs({"url": self.url, "alert_rules": self.alert_rules})


class Grafana(pulumi.ComponentResource):
    """Built from GrafanaArgs: the dashboards with `prometheus_url` as
    datasource; a server on docker/kubernetes (admin password: a secret), files
    on local. Outputs: `url` (None on local)."""

    def __init__(self, name: str, args: GrafanaArgs, opts: pulumi.ResourceOptions | None = None):
        naming.component(self, "mirrorstack:monitoring:Grafana", name, opts)
        platform = args.platform
        files = functools.partial(grafana_files, delivery=args.delivery)
        ran = platform.run(grafana_service(name, files, args.prometheus_url, args.admin_password, platform,
                                           capabilities(platform.name).runs_containers),
                           opts=pulumi.ResourceOptions(parent=self, depends_on=[args.prometheus_server]))
        self.server, self.url = ran.resource, ran.url
        self.register_outputs({"url": self.url})


class Monitoring(pulumi.ComponentResource):
    """Prometheus and Grafana (and the platform's extras) built from
    MonitoringArgs. Outputs: `prometheus_url`, `grafana_url`
    (None on local), `alert_rules` (names), `grafana_password` (secret, or None)."""

    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None):
        naming.component(self, "mirrorstack:monitoring:Monitoring", name, opts)
        topology, clusters, platform = args.topology, args.clusters, args.platform
        grafana_password = args.grafana_password
        child = pulumi.ResourceOptions(parent=self)
        targets = [t for c in [*clusters.values(), *args.connect.values()] for t in c.scrape_targets]
        targets += args.services
        targets += run_extras(platform, topology.monitoring, clusters, opts=child)  # kafka-exporter targets, if any
        self.prometheus = Prometheus("prometheus", PrometheusArgs(
            topology=topology, targets=targets, platform=platform, clusters=clusters, drill=args.drill), opts=child)
        self.prometheus_url, self.alert_rules = self.prometheus.url, self.prometheus.alert_rules
        self.grafana, self.grafana_url, self.grafana_password = None, None, None
        serves_grafana = capabilities(platform.name).serves_grafana
        if topology.monitoring.grafana or not serves_grafana:
            if grafana_password is None and serves_grafana:
                grafana_password = GeneratedPassword("grafana-admin-password", opts=child).result
            self.grafana_password = pulumi.Output.secret(grafana_password) if grafana_password is not None else None
            self.grafana = Grafana("grafana", GrafanaArgs(
                platform=platform, prometheus_url=self.prometheus.datasource_url, prometheus_server=self.prometheus.server,
                admin_password=grafana_password, delivery=topology.validates_continuously), opts=child)
            self.grafana_url = self.grafana.url
        self.register_outputs({"prometheus_url": self.prometheus_url, "grafana_url": self.grafana_url,
                               "alert_rules": self.alert_rules})
