"""The continuous validation as a stack's service (`validation.mode: continuous` or `both`):
mirrorstack.spark.streaming run by the platform beside the flows (a process under its keeper on
local, a container in the spark image on docker, a Deployment's pod on kubernetes), on the Spark
`validation.master` names: its standalone cluster or Spark Connect server (local), executor pods of
its own (a `k8s://` master), else local[2] where it runs; started again whenever it exits and going on from its
checkpoint in the folder the platform keeps for it. Its /metrics join the
stack's Prometheus, whose alert rules (monitoring/alerts.py) watch its figures."""
from __future__ import annotations

import pulumi

from mirrorstack.model.spark_masters import master_kind
from mirrorstack.platforms.descriptions import PythonModuleService, ScrapeTarget, SparkExecutorPods
from mirrorstack.shipping import project_imports
from mirrorstack.validation.executor_pods import DRIVER_RULES, EXECUTOR_SCRIPT, executor_pods_conf
from mirrorstack.validation.job import validated_input
from mirrorstack.validation.job_config import validation_job_config

MODULE = "mirrorstack.spark.streaming"
SERVICE = "continuous-validation"
ROLE = "validator"  # its scrape target's role label (the ContinuousValidatorDown alert's)
# An executor runs the ledgers in a Python worker (pandas, Arrow) beside its JVM: room for it in the pod.
PYTHON_WORKER_OVERHEAD = {"spark.executor.memoryOverhead": "768m"}


def continuous_config(topology, servers: dict[str, str], clients: dict[str, dict[str, str]]) -> dict:
    """What the validator reads (its listen address, jars and state folder are the platform's): the
    one-shot job's flows JSON (`job`) and the streaming settings."""
    validation = topology.validation
    settings = validation.continuous
    config = {"job": validation_job_config(topology, servers, clients), "window_seconds": settings.window_seconds,
              "trigger_seconds": settings.trigger_seconds, "driver_memory": settings.driver_memory}
    if settings.checkpoint_location:
        config["checkpoint_location"] = settings.checkpoint_location
    if master_kind(validation.master) != "local":  # the job's cluster; else local[2] where it runs
        config["master"] = validation.master
    if validation.runs_executor_pods:  # their sizes are session settings (executor_pods_conf)
        config["executor_wait_seconds"] = validation.executor_wait_seconds
    return config | (validation.standalone_executors or {})  # as the job's are asked for


def executor_pods(validation) -> SparkExecutorPods | None:
    """With a `k8s://` master the validator's driver starts executor pods, as the one-shot job's does."""
    if not validation.runs_executor_pods:
        return None
    return SparkExecutorPods(EXECUTOR_SCRIPT, DRIVER_RULES,
                             lambda pods: {**executor_pods_conf(validation, pods), **PYTHON_WORKER_OVERHEAD})


def run_continuous_validation(topology, clusters: dict, platform, flows: list,
                              opts: pulumi.ResourceOptions) -> tuple[ScrapeTarget, pulumi.Output[str]]:
    """The validator of the topology's validated flows once they run: (its scrape target, its
    /metrics URL from this machine, known once it serves)."""
    config, secured_aliases = validated_input(
        topology, clusters, lambda servers, clients: continuous_config(topology, servers, clients))
    secured = [r for a in secured_aliases for r in clusters[a].client_resources]
    ran = platform.run(PythonModuleService(SERVICE, MODULE, project_imports(MODULE), config, runs_spark=True,
                                           executor_pods=executor_pods(topology.validation),
                                           uses_clients=tuple(secured_aliases)),
                       opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[*flows, *secured])))
    url = pulumi.Output.all(ran.resource.urn).apply(lambda _: f"{ran.url}/metrics")
    return ScrapeTarget(SERVICE, "%s:%d" % ran.address, {"role": ROLE}), url
