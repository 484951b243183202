"""Grafana provisioning: the Prometheus datasource and a file provider for the
generated dashboards (components/monitoring/dashboards.py)."""
from __future__ import annotations

import yaml

from mirrorstack.monitoring.dashboards import dashboards

DATASOURCE_UID = "mirrorstack-prometheus"


def grafana_files(prometheus_url: str, dashboards_dir: str, delivery: bool = False) -> dict[str, str]:
    """Relative path → content: `provisioning/...` for Grafana's provisioning
    folder, `dashboards/*.json` for the folder the provider reads (`dashboards_dir`);
    `delivery`: the overview has the continuous validator's row."""
    datasource = {"apiVersion": 1, "datasources": [{
        "name": "Prometheus", "type": "prometheus", "uid": DATASOURCE_UID, "access": "proxy",
        "url": prometheus_url, "isDefault": True, "editable": False}]}
    provider = {"apiVersion": 1, "providers": [{
        "name": "mirrorstack", "folder": "MirrorMaker 2", "type": "file", "disableDeletion": True,
        "allowUiUpdates": False, "options": {"path": dashboards_dir}}]}
    files = {"provisioning/datasources/prometheus.yaml": yaml.safe_dump(datasource, sort_keys=False),
             "provisioning/dashboards/mirrorstack.yaml": yaml.safe_dump(provider, sort_keys=False)}
    files.update({f"dashboards/{name}": text for name, text in dashboards(delivery).items()})
    return files
