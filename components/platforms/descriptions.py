"""What the concept folders hand a platform: descriptions of what to run and
what a run serves, as data. A platform turns them into processes, containers or
Kubernetes objects; it never imports the folder that made them (kafka/,
connect/, monitoring/, validation/)."""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple


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


class JobOutput(NamedTuple):
    """How a run-once job's output is read and said, in the job's own words
    (validation/outcome.py has the validation job's): the platform runs the job,
    passes on its progress lines and fails `up` with these messages. It travels
    into a dynamic resource's provider, pickled: a tuple of functions named by
    reference (no dict: pulumi's pickler wraps every dict's items once more per
    provider it has serialised in the process)."""
    failed_exit: int                                  # the exit code of a run that found failures
    is_progress: Callable[[str], bool]                # a line worth showing while it runs
    printed_outcome: Callable[[list[str]], dict | None]  # the summary it printed: status, passed, failures
    failed_message: Callable[[str, str, list[str]], str]  # (name, where its report is, failures)
    could_not_run_message: Callable[..., str]         # (name, exit code, its lines, hint="")
    report_summary: Callable[[dict], dict]            # its report file's summary (status, passed, failures...)


@dataclass(frozen=True)
class SparkJob:
    """A PySpark job run once per change of its inputs: `entry` (spark-submit's
    main file) and its package (`zip_bytes`, named `zip_name`, on --py-files;
    `make_zip` builds it again where the job runs on this machine),
    `submit_argv(settings, *, job_path, config_path, jars, py_files)` the
    spark-submit line in an image, and `output`, how its output is read."""
    entry: Path
    zip_bytes: bytes
    zip_name: str
    make_zip: Callable[[], bytes]
    submit_argv: Callable[..., list[str]]
    output: JobOutput

    @property
    def entry_text(self) -> str:
        return self.entry.read_text()

    @property
    def sha256(self) -> str:
        """Of the main file and the zip: a change to any module re-runs the job."""
        return hashlib.sha256(self.entry.read_bytes() + b"\0" + self.zip_bytes).hexdigest()
