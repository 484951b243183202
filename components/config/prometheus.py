"""prometheus.yml from scrape jobs."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import yaml


def prometheus_config(
    jobs: Mapping[str, Sequence[str]], *, scrape_interval: str = "15s",
    labels: Mapping[str, Mapping[str, str]] | None = None,
) -> str:
    """`jobs` maps a job name to its `host:port` targets; `labels` adds static
    labels per job (e.g. cluster, role)."""
    labels = labels or {}
    scrape_configs = []
    for job, targets in jobs.items():
        static = {"targets": list(targets)}
        if labels.get(job):
            static["labels"] = dict(labels[job])
        scrape_configs.append({"job_name": job, "static_configs": [static]})
    config = {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
        "scrape_configs": scrape_configs,
    }
    return yaml.safe_dump(config, sort_keys=False)
