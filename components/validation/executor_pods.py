"""The validation job's executors as pods: its driver (the Job's pod) runs
spark-submit with a `k8s://` master in client mode, and Spark's Kubernetes
scheduler starts the executor pods. Here: what the driver may do through the
API, how an executor container starts in the mirrorstack/spark image, and
spark-submit's settings. Pure: no pulumi."""
from __future__ import annotations

from mirrorstack.platforms.descriptions import POD_IP_ENV, POD_NAME_ENV, ExecutorPods

DEFAULT_EXECUTOR_INSTANCES = 2

# Client mode: the driver makes, watches and deletes its executor pods and the ConfigMap with
# their Spark settings; nothing else (no Service: executors reach the driver at its pod's IP).
DRIVER_RULES = (
    {"apiGroups": [""], "resources": ["pods", "configmaps"],
     "verbs": ["create", "get", "list", "watch", "delete", "deletecollection"]},
)

# Spark starts an executor container with the argument `executor` and its settings in the
# environment (SPARK_DRIVER_URL, SPARK_JAVA_OPT_<n>, ...); the image has no entrypoint of
# Spark's, so the pod template's command is this.
EXECUTOR_SCRIPT = r"""#!/bin/bash
set -euo pipefail
java_options=()
for name in $(env | sed -n 's/^\(SPARK_JAVA_OPT_[0-9]*\)=.*/\1/p' | sort -t_ -k4 -n); do
  java_options+=("${!name}")
done
exec java "${java_options[@]}" -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" \
  -cp "${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}$SPARK_HOME/jars/*" \
  org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
  --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID" --cores "$SPARK_EXECUTOR_CORES" \
  --app-id "$SPARK_APPLICATION_ID" --hostname "$SPARK_EXECUTOR_POD_IP" \
  --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" --podName "$SPARK_EXECUTOR_POD_NAME"
"""

def executor_pods_conf(settings, pods: ExecutorPods) -> dict[str, str]:
    """The Spark settings of a client-mode driver in a pod whose executors are pods (`settings`: the
    topology's validation). `$(NAME)`: the driver pod's environment (its own name and IP)."""
    conf = {
        "spark.kubernetes.namespace": pods.namespace,
        "spark.kubernetes.container.image": pods.image,
        "spark.kubernetes.container.image.pullPolicy": "IfNotPresent",
        "spark.kubernetes.executor.podTemplateFile": pods.template_path,
        # Owned by the driver's pod: gone with it, whatever ends the job.
        "spark.kubernetes.driver.pod.name": f"$({POD_NAME_ENV})",
        "spark.driver.host": f"$({POD_IP_ENV})",
        "spark.executor.instances": str(settings.executor_instances or DEFAULT_EXECUTOR_INSTANCES),
        # Each executor uses what CPU is free; the request only places the pod, like the driver's.
        "spark.kubernetes.executor.request.cores": pods.cpu_request,
        # No claims: nothing to list or keep across executors (and no right to).
        "spark.kubernetes.driver.ownPersistentVolumeClaim": "false",
        "spark.kubernetes.driver.reusePersistentVolumeClaim": "false",
    }
    if settings.jvm_options:  # the executors' JVMs start from this script, as the driver's: the same JIT question
        conf["spark.executor.extraJavaOptions"] = " ".join(settings.jvm_options)
    if settings.executor_memory:
        conf["spark.executor.memory"] = settings.executor_memory
    if settings.executor_cores:
        conf["spark.executor.cores"] = str(settings.executor_cores)
    return conf


def executor_pods_argv(settings, pods: ExecutorPods) -> list[str]:
    """spark-submit's arguments for executor pods (after --master)."""
    conf, argv = executor_pods_conf(settings, pods), ["--deploy-mode", "client"]
    flags = {"spark.executor.memory": "--executor-memory", "spark.executor.cores": "--executor-cores"}
    for key, value in conf.items():
        argv += [flags[key], value] if key in flags else ["--conf", f"{key}={value}"]
    return argv
