"""PrometheusArgs, GrafanaArgs, MonitoringArgs: what the monitoring components are built from."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi

from mirrorstack.connect.cluster import ConnectCluster
from mirrorstack.described import PLATFORM, described
from mirrorstack.platforms.base import Platform
from mirrorstack.kafka.cluster import KafkaCluster
from mirrorstack.model.spec import Topology
from mirrorstack.monitoring.prometheus import ScrapeTarget

TOPOLOGY = "the validated topology: its `monitoring` section (alert thresholds, scrape interval, grafana) and flows"
CLUSTERS = "alias → KafkaCluster; the secured ones add their certificates' expiries and renewal alert"


@dataclass(frozen=True, kw_only=True)
class PrometheusArgs:
    topology: Topology = described(TOPOLOGY)
    targets: list[ScrapeTarget] = described("the JMX exporters (and extras) to scrape")
    platform: Platform = described(PLATFORM)
    clusters: dict[str, KafkaCluster] = described(CLUSTERS, default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class GrafanaArgs:
    platform: Platform = described(PLATFORM)
    # The server and its URL, not the Prometheus component: that module imports these Args.
    prometheus_url: pulumi.Input[str] = described("Prometheus's URL, the dashboards' datasource (a "
                                                  "Prometheus component's `url`)")
    prometheus_server: pulumi.Resource = described("the resource that runs Prometheus (a Prometheus "
                                                   "component's `server`): Grafana starts after it")
    admin_password: pulumi.Input[str] | None = described(
        "the admin password (a secret; docker/kubernetes), or None", default=None)


@dataclass(frozen=True, kw_only=True)
class MonitoringArgs:
    topology: Topology = described(TOPOLOGY)
    clusters: dict[str, KafkaCluster] = described(
        f"{CLUSTERS} (built with metrics=True: their scrape targets)")
    connect: dict[str, ConnectCluster] = described(
        "name → ConnectCluster (built with metrics=True: their scrape targets)")
    platform: Platform = described(PLATFORM)
    grafana_password: pulumi.Input[str] | None = described(
        "Grafana's admin password (a secret; docker/kubernetes); when None one is generated once and kept in "
        "state as a secret", default=None)
