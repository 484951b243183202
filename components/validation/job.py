"""SparkValidationJob: spark/validate_replication.py as part of the stack.

It depends on the flows (their connectors are RUNNING when it starts), reads
each validated flow's clusters, and on the local platform returns the report
summary as `report` (the stack output `validation`); docker runs the job in
the official Spark image, kubernetes as a Job (plus a CronJob on `schedule`).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import pulumi

from components import naming
from components.validation.args import SparkValidationJobArgs
from components.validation.job_config import job_modules, validation_job_config

# spark/validate_replication.py and its validation_*.py modules, linked into the
# package so an installed wheel carries them.
JOB_FILE = Path(__file__).parents[1] / "jobs" / "validate_replication.py"


def job_sha256() -> str:
    """Of the entry script and every module: a change to any of them re-runs the job."""
    digest = hashlib.sha256(JOB_FILE.read_bytes())
    for module in job_modules(JOB_FILE):
        digest.update(module.name.encode() + b"\0" + module.read_bytes())
    return digest.hexdigest()


class SparkValidationJob(pulumi.ComponentResource):
    """The job built from SparkValidationJobArgs. Outputs: `report` — local:
    {passed, failures, flows: {name: counts and failover per consumer group}};
    docker/kubernetes: where the run is."""

    report: pulumi.Output[dict]

    def __init__(self, name: str, args: SparkValidationJobArgs, opts: pulumi.ResourceOptions | None = None):
        naming.component(self, "mirrorstack:validation:SparkValidationJob", name, opts)
        topology, clusters = args.topology, args.clusters
        settings = topology.validation
        if args.run_id:
            settings = settings.model_copy(update={"run_id": args.run_id})
        aliases = sorted({a for f in topology.validated_flows() for a in (f.source, f.target)})
        clients = {a: clusters[a].client_settings for a in aliases}
        config = pulumi.Output.all(**{a: clusters[a].bootstrap_servers for a in aliases}).apply(
            lambda servers: validation_job_config(topology, servers, clients))
        secured = [a for a in aliases if clusters[a].client_files is not None]  # their client folders are read
        self.job = args.platform.run_spark_job(
            f"{name}-job", job_file=JOB_FILE, job_sha256=job_sha256(), config=config, settings=settings,
            uses_clients=secured, opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*args.flows, *(r for a in secured for r in clusters[a].client_resources)]))
        self.report = self.job.report
        self.register_outputs({"report": self.report})
