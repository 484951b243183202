"""prometheus.yml from scrape targets: one job per Kafka cluster and per Connect
cluster, with `cluster`, `role` (and `connect`) labels, and a `flow` label
(`<source>-><target>`) made from MirrorMaker 2's own source/target labels."""
from __future__ import annotations

from collections.abc import Sequence

import yaml

from mirrorstack.platforms.descriptions import ScrapeTarget


# MM2 series carry source and target; a `flow` label lets dashboards and alerts
# select a flow as the stack file names it.
FLOW_RELABEL = {"source_labels": ["source", "target"], "separator": "->", "regex": "(.+->.+)",
                "target_label": "flow", "replacement": "$1", "action": "replace"}


def prometheus_config(targets: Sequence[ScrapeTarget], *, scrape_interval: str = "15s",
                      evaluation_interval: str | None = None, rule_files: Sequence[str] = ()) -> str:
    jobs: dict[str, dict[tuple, list[str]]] = {}
    for target in targets:
        groups = jobs.setdefault(target.job, {})
        groups.setdefault(tuple(sorted(target.labels.items())), []).append(target.address)
    scrape_configs = []
    for job, groups in jobs.items():
        entry: dict = {"job_name": job, "static_configs": [
            {"targets": addresses, **({"labels": dict(labels)} if labels else {})}
            for labels, addresses in groups.items()]}
        if any(dict(labels).get("role") == "connect" for labels in groups):
            entry["metric_relabel_configs"] = [FLOW_RELABEL]
        scrape_configs.append(entry)
    config: dict = {"global": {"scrape_interval": scrape_interval,
                               "evaluation_interval": evaluation_interval or scrape_interval}}
    if rule_files:
        config["rule_files"] = list(rule_files)
    config["scrape_configs"] = scrape_configs
    return yaml.safe_dump(config, sort_keys=False)
