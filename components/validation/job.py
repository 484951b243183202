"""SparkValidationJob: the validation job (the `spark` package) as part of the stack.

It depends on the flows (their connectors are RUNNING when it starts), reads
each validated flow's clusters, and returns the report's summary as `report`
(the stack output `validation`) on every platform: local runs it in `up`'s
process tree or on a Spark cluster, docker in the Spark image, kubernetes as a
Job (plus a CronJob on `schedule`).
"""
from __future__ import annotations

import pulumi

from mirrorstack import naming
from mirrorstack.validation.args import SparkValidationJobArgs
from mirrorstack.validation.job_config import validation_job_config
from mirrorstack.validation.package import job_package


def validated_input(topology, clusters: dict, build) -> tuple[pulumi.Output, list[str]]:
    """`build(servers, clients)` (alias -> bootstrap servers, alias -> client settings of the validated
    flows' clusters) once their addresses are known; and the secured aliases, whose client folders are read."""
    aliases = sorted({a for f in topology.validated_flows() for a in (f.source, f.target)})
    clients = {a: clusters[a].client_settings for a in aliases}
    config = pulumi.Output.all(**{a: clusters[a].bootstrap_servers for a in aliases}).apply(
        lambda servers: build(servers, clients))
    return config, [a for a in aliases if clusters[a].client_files is not None]


class SparkValidationJob(pulumi.ComponentResource):
    """The job built from SparkValidationJobArgs. Outputs: `report` — {status, passed,
    failures, records_checked, flows: {name: counts and failover per consumer group}},
    on docker and kubernetes with where the run is (container or Job, its log)."""

    report: pulumi.Output[dict]

    def __init__(self, name: str, args: SparkValidationJobArgs, opts: pulumi.ResourceOptions | None = None):
        naming.component(self, "mirrorstack:validation:SparkValidationJob", name, opts)
        topology, clusters = args.topology, args.clusters
        settings = topology.validation
        if args.run_id:
            settings = settings.model_copy(update={"run_id": args.run_id})
        drill = pulumi.Output.from_input(args.drill)  # its report, once the drill ran: the copies it proves
        config, secured = validated_input(topology, clusters, lambda servers, clients: drill.apply(
            lambda report: validation_job_config(topology, servers, clients, drill=report)))
        self.job = args.platform.run_job(
            f"{name}-job", job=job_package(), config=config, settings=settings,
            uses_clients=secured, opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*args.flows, *(r for a in secured for r in clusters[a].client_resources)]))
        self.report = self.job.report
        self.register_outputs({"report": self.report})
