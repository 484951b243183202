"""PrometheusArgs, GrafanaArgs, MonitoringArgs: what the monitoring components are built from.

The clusters are typed by what monitoring reads of them (`ScrapedGroup`, `MonitoredKafka`),
not by kafka/ and connect/'s components: those build the Java services with
monitoring's JMX rules, so monitoring stays below them."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pulumi

from mirrorstack.described import PLATFORM, described
from mirrorstack.platforms.base import Platform
from mirrorstack.model.spec import Topology
from mirrorstack.platforms.descriptions import ScrapeTarget


class ScrapedGroup(Protocol):
    """A group of services with metrics (a ConnectCluster built with metrics=True)."""
    scrape_targets: Sequence[ScrapeTarget]


class MonitoredKafka(ScrapedGroup, Protocol):
    """A Kafka cluster (a KafkaCluster): its scrape targets, and for the secured ones
    (`tls` not None) the certificates whose expiries the alert rules watch; the
    platform's extras read `bootstrap_servers`."""
    tls: Any  # the cluster's certificates component (its `certificates` output), or None
    renew_before_days: int
    bootstrap_servers: pulumi.Output[str]

TOPOLOGY = "the validated topology: its `monitoring` section (alert thresholds, scrape interval, grafana) and flows"
CLUSTERS = "alias → KafkaCluster; the secured ones add their certificates' expiries and renewal alert"
DRILL = ("the last failover drill's report (a FailoverDrill's `report`), when the topology has failover.drill: its "
         "figures as series and the alert when none passed within failover.drill.pass_within_days")


@dataclass(frozen=True, kw_only=True)
class PrometheusArgs:
    topology: Topology = described(TOPOLOGY)
    targets: list[ScrapeTarget] = described("the JMX exporters (and extras) to scrape")
    platform: Platform = described(PLATFORM)
    clusters: dict[str, MonitoredKafka] = described(CLUSTERS, default_factory=dict)
    drill: pulumi.Input[dict] | None = described(DRILL, default=None)


@dataclass(frozen=True, kw_only=True)
class GrafanaArgs:
    platform: Platform = described(PLATFORM)
    # The server and its URL, not the Prometheus component: that module imports these Args.
    prometheus_url: pulumi.Input[str] = described("Prometheus's URL as Grafana reaches it, the dashboards' "
                                                  "datasource (a Prometheus component's `datasource_url`)")
    prometheus_server: pulumi.Resource = described("the resource that runs Prometheus (a Prometheus "
                                                   "component's `server`): Grafana starts after it")
    admin_password: pulumi.Input[str] | None = described(
        "the admin password (a secret; docker/kubernetes), or None", default=None)
    delivery: bool = described("the overview dashboard has the continuous validator's row", default=False)


@dataclass(frozen=True, kw_only=True)
class MonitoringArgs:
    topology: Topology = described(TOPOLOGY)
    clusters: dict[str, MonitoredKafka] = described(
        f"{CLUSTERS} (built with metrics=True: their scrape targets)")
    connect: dict[str, ScrapedGroup] = described(
        "name → ConnectCluster (built with metrics=True: their scrape targets)")
    platform: Platform = described(PLATFORM)
    grafana_password: pulumi.Input[str] | None = described(
        "Grafana's admin password (a secret; docker/kubernetes); when None one is generated once and kept in "
        "state as a secret", default=None)
    services: list[ScrapeTarget] = described(
        "other services' /metrics to scrape (the continuous validator's)", default_factory=list)
    drill: pulumi.Input[dict] | None = described(DRILL, default=None)
