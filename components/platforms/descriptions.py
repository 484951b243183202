"""What the concept folders hand a platform: descriptions of what to run and
what a run serves, as data. A platform turns them into processes, containers or
Kubernetes objects; it never imports the folder that made them (kafka/,
connect/, monitoring/, validation/)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ScrapeTarget:
    """A /metrics endpoint Prometheus scrapes: the JMX exporter of a broker,
    controller or worker, a supervisor, or a platform's extra (kafka-exporter)."""
    job: str                        # kafka-<alias> | connect-<name> | supervisor-<name> | kafka-exporter-<alias>
    address: str                    # host:port of the endpoint
    labels: Mapping[str, str] = field(default_factory=dict)  # cluster, role, connect


# Grafana's files given where its datasource (Prometheus) is as Grafana reaches it and the folder
# its dashboards are read from: relative path → content, `provisioning/...` for Grafana's
# provisioning folder, `dashboards/...` for that folder (monitoring.grafana.grafana_files).
GrafanaFiles = Callable[[str, str], dict[str, str]]
