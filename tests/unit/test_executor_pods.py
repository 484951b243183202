"""The validation job with its executors as pods (`validation.master:
k8s://https://kubernetes.default.svc`), under Pulumi mocks: the driver's own
ServiceAccount and Role (only what Spark's driver does), made before the Job and
its CronJob; the driver's spark-submit line; the executors' pod template and
command in the job's ConfigMap, with the driver's security and files."""
from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import kubernetes_validate
import pytest

from mirrorstack.platforms.containers import IMAGE_SPARK_STATE_DIR, JOB_DIR
from mirrorstack.platforms.kubernetes.manifests import KUBERNETES_VERSION
from mirrorstack.platforms.kubernetes.platform import KubernetesPlatform
from mirrorstack.spark.streaming import package_zip, service_args
from mirrorstack.validation.continuous import SERVICE
from mirrorstack.validation.executor_pods import DRIVER_RULES, EXECUTOR_SCRIPT
from tests.support.mocked_runs import manifests_of
from tests.support.pulumi_mocks import deploy, stack_topology

STACK, JOB, IMAGE = "aggregation", "validation-job", "registry.example.com/mirrorstack/spark:1"
NAMESPACE = f"mirrorstack-{STACK}"
MASTER = "k8s://https://kubernetes.default.svc"


@pytest.fixture(scope="module")
def run():
    topology = stack_topology(STACK, platform="kubernetes", images={"spark": IMAGE}, validation={
        "master": MASTER, "executor_instances": 3, "executor_memory": "512m", "executor_cores": 1,
        "executor_wait_seconds": 90, "schedule": "0 * * * *"})
    return deploy(lambda: KubernetesPlatform(STACK, settings=topology.kubernetes, images=topology.images), topology)


def conf(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "--conf")


def test_the_driver_has_its_own_account_holding_only_what_spark_needs(run):
    mocks, built = run
    name = f"{JOB}-driver"
    (account,) = manifests_of(built, "ServiceAccount").values()
    (role,) = manifests_of(built, "Role").values()
    (binding,) = manifests_of(built, "RoleBinding").values()
    assert account["metadata"]["name"] == role["metadata"]["name"] == binding["metadata"]["name"] == name
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods", "configmaps"],
                              "verbs": ["create", "get", "list", "watch", "delete", "deletecollection"]}]
    assert role["rules"] == [dict(r) for r in DRIVER_RULES]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]
    job, cron = manifests_of(built, "Job")[JOB], manifests_of(built, "CronJob")[f"{JOB}-cron"]
    for pod in (job["spec"]["template"], cron["spec"]["jobTemplate"]["spec"]["template"]):
        assert pod["spec"]["serviceAccountName"] == name
    # the Job waits for the account and its rights (a driver without them could start no executor)
    needed = {(r.typ, r.registered_name) for r in mocks.resources
              if r.typ.startswith(("kubernetes:rbac", "kubernetes:core/v1:ServiceAccount"))}
    assert len(needed) == 3
    for typ in ("kubernetes:batch/v1:Job", "kubernetes:batch/v1:CronJob"):
        (made,) = [r for r in mocks.resources if r.typ == typ]
        assert needed <= mocks.dependencies[(typ, made.registered_name)], typ


def test_the_driver_asks_for_executor_pods_of_the_stacks_image(run):
    _, built = run
    container = manifests_of(built, "Job")[JOB]["spec"]["template"]["spec"]["containers"][0]
    argv = container["command"]
    assert argv[argv.index("--master") + 1] == MASTER and argv[argv.index("--deploy-mode") + 1] == "client"
    settings = conf(argv)
    assert settings["spark.kubernetes.namespace"] == NAMESPACE
    assert settings["spark.kubernetes.container.image"] == IMAGE
    assert settings["spark.executor.instances"] == "3"
    assert settings["spark.kubernetes.executor.podTemplateFile"] == f"{JOB_DIR}/job/executor-pod.json"
    # Kubernetes fills in $(NAME) from the container's environment: the driver's own pod and IP
    assert (settings["spark.kubernetes.driver.pod.name"], settings["spark.driver.host"]) == ("$(POD_NAME)", "$(POD_IP)")
    assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]} == {
        "POD_NAME": "metadata.name", "POD_IP": "status.podIP"}
    assert argv[argv.index("--executor-memory") + 1] == "512m" and argv[argv.index("--executor-cores") + 1] == "1"
    assert argv[argv.index("--executor-wait-seconds") + 1] == "90"


def test_executors_are_made_from_a_template_with_the_drivers_security_and_files(run):
    _, built = run
    files = manifests_of(built, "ConfigMap")[f"{JOB}-job"]["data"]
    assert files["executor.sh"] == EXECUTOR_SCRIPT
    template = json.loads(files["executor-pod.json"])
    kubernetes_validate.validate(template, desired_version=KUBERNETES_VERSION, strict=True)
    driver = manifests_of(built, "Job")[JOB]["spec"]["template"]["spec"]
    assert template["spec"]["securityContext"] == driver["securityContext"]
    (executor,) = template["spec"]["containers"]
    assert executor["command"] == ["bash", f"{JOB_DIR}/job/executor.sh"]
    # the job's files and /tmp as the driver has them; not the flows (the driver alone reads them)
    assert {m["mountPath"] for m in executor["volumeMounts"]} == \
        {m["mountPath"] for m in driver["containers"][0]["volumeMounts"]} - {f"{JOB_DIR}/flows"}
    assert "flows" not in {v["name"] for v in template["spec"]["volumes"]}
    assert template["metadata"]["labels"]["app.kubernetes.io/component"] == "executor"


def test_without_executor_pods_the_job_has_no_account_and_runs_local(run):
    topology = stack_topology(STACK, platform="kubernetes", images={"spark": IMAGE})
    _, built = deploy(lambda: KubernetesPlatform(STACK, settings=topology.kubernetes, images=topology.images), topology)
    assert not manifests_of(built, "ServiceAccount") and not manifests_of(built, "Role")
    pod = manifests_of(built, "Job")[JOB]["spec"]["template"]["spec"]
    assert "serviceAccountName" not in pod and "env" not in pod["containers"][0]
    argv = pod["containers"][0]["command"]
    assert argv[argv.index("--master") + 1] == "local[*]" and "--deploy-mode" not in argv
    assert "executor.sh" not in manifests_of(built, "ConfigMap")[f"{JOB}-job"]["data"]


@pytest.fixture(scope="module")
def continuous():
    """mode both: the continuous validator's driver starts executor pods too."""
    topology = stack_topology(STACK, platform="kubernetes", images={"spark": IMAGE}, validation={
        "mode": "both", "master": MASTER, "executor_instances": 2, "executor_wait_seconds": 90})
    return deploy(lambda: KubernetesPlatform(STACK, settings=topology.kubernetes, images=topology.images), topology)


def test_the_continuous_validators_driver_is_a_deployment_with_its_own_account_and_state_volume(continuous):
    _, built = continuous
    name = f"{SERVICE}-driver"
    assert manifests_of(built, "Role")[name]["rules"] == [dict(r) for r in DRIVER_RULES]
    assert manifests_of(built, "RoleBinding")[name]["subjects"] == [
        {"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]
    claim = manifests_of(built, "PersistentVolumeClaim")[f"{SERVICE}-state"]
    kubernetes_validate.validate(claim, desired_version=KUBERNETES_VERSION, strict=True)
    deployment = manifests_of(built, "Deployment")[SERVICE]
    kubernetes_validate.validate(deployment, desired_version=KUBERNETES_VERSION, strict=True)
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}  # one driver writes the checkpoint
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == name
    (container,) = pod["containers"]
    assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]} == {
        "POD_NAME": "metadata.name", "POD_IP": "status.podIP"}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["state"]["persistentVolumeClaim"] == {"claimName": f"{SERVICE}-state"}
    assert {"name": "state", "mountPath": IMAGE_SPARK_STATE_DIR} in container["volumeMounts"]


def test_the_continuous_validators_executors_share_its_checkpoint_on_its_node(continuous, tmp_path, monkeypatch):
    _, built = continuous
    files = {k.rsplit("__", 1)[-1]: v for k, v in manifests_of(built, "ConfigMap")[f"{SERVICE}-files"]["data"].items()}
    assert files["executor.sh"] == EXECUTOR_SCRIPT
    template = json.loads(files["executor-pod.json"])
    kubernetes_validate.validate(template, desired_version=KUBERNETES_VERSION, strict=True)
    (executor,) = template["spec"]["containers"]
    assert {"name": "state", "mountPath": IMAGE_SPARK_STATE_DIR} in executor["volumeMounts"]
    # a ReadWriteOnce volume: the executors go where the driver (its pod, not an executor) is
    (term,) = template["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"] == {"matchLabels": {"app.kubernetes.io/instance": SERVICE},
                                     "matchExpressions": [{"key": "spark-role", "operator": "DoesNotExist"}]}
    config = json.loads(files["config.json"])
    assert config["master"] == MASTER and config["executor_wait_seconds"] == 90
    settings = config["spark_conf"]
    assert (settings["spark.kubernetes.namespace"], settings["spark.kubernetes.container.image"],
            settings["spark.executor.instances"]) == (NAMESPACE, IMAGE, "2")
    assert settings["spark.kubernetes.executor.podTemplateFile"].endswith(f"/{SERVICE}/executor-pod.json")
    assert settings["spark.executor.memoryOverhead"] == "768m"
    assert settings["spark.kubernetes.executor.request.cores"] == "100m"  # idle between batches
    # the validator reads it as its arguments: $(NAME) from its pod's environment
    config["state_dir"] = str(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv("POD_NAME", "continuous-validation-abc"), monkeypatch.setenv("POD_IP", "10.1.2.3")
    args = service_args(str(tmp_path / "config.json"))
    assert args.master == MASTER and args.executor_wait_seconds == 90
    given = dict(item.split("=", 1) for item in args.conf)
    assert (given["spark.driver.host"], given["spark.kubernetes.driver.pod.name"]) == (
        "10.1.2.3", "continuous-validation-abc")
    # what its executors import the ledger from (a cluster master's)
    with zipfile.ZipFile(package_zip(tmp_path)) as package:
        assert {"mirrorstack/spark/stream_match.py", "mirrorstack/spark/streaming.py"} <= set(package.namelist())


def test_the_package_zip_is_the_same_bytes_for_the_same_files_and_named_by_its_bytes(tmp_path):
    """A restarted driver's executors find the zip of the driver before in their working folder (the
    state volume, on kubernetes), and Spark refuses a file of that name with other bytes: the same code
    zips to the same bytes whatever its files' times (a pod's mounted files get new ones each start),
    and other code (an upgrade) to another name."""
    import mirrorstack.spark.stream_match as module
    first, again = tmp_path / "first", tmp_path / "again"
    first.mkdir(), again.mkdir()
    zipped = package_zip(first)
    source = Path(module.__file__)
    stat = source.stat()
    os.utime(source, (stat.st_atime, stat.st_mtime + 3600))  # the same files, touched
    try:
        rezipped = package_zip(again)
    finally:
        os.utime(source, (stat.st_atime, stat.st_mtime))
    assert rezipped.name == zipped.name and rezipped.read_bytes() == zipped.read_bytes()
    assert zipped.name == f"mirrorstack-package-{hashlib.sha256(zipped.read_bytes()).hexdigest()[:12]}.zip"


def test_a_deployment_is_made_again_when_its_files_change():
    """Prometheus's config gains the validator's target: its pod must start again to read it (a subPath
    mount never sees a ConfigMap update)."""
    def prometheus(mode: str) -> tuple[str, str]:
        topology = stack_topology(STACK, platform="kubernetes", monitoring={"grafana": False},
                                  images={"spark": IMAGE, "kafka": "registry.example.com/mirrorstack/kafka:1"},
                                  validation={"mode": mode})
        _, built = deploy(lambda: KubernetesPlatform(STACK, settings=topology.kubernetes, images=topology.images),
                          topology)
        (config,) = [v for k, v in manifests_of(built, "ConfigMap")["prometheus-files"]["data"].items()
                     if k.endswith("prometheus.yml")]
        pod = manifests_of(built, "Deployment")["prometheus"]["spec"]["template"]
        return pod["metadata"]["annotations"]["mirrorstack.io/files-sha256"], config
    (once, once_config), (both, both_config) = prometheus("once"), prometheus("both")
    assert SERVICE not in once_config and SERVICE in both_config and once != both


def test_the_jobs_jvm_options_reach_the_executor_pods_too():
    """`validation.jvm_options` on the executors' JVMs as on the driver's (C1 for a small check),
    through Spark's executor setting, which the executor script puts on its java command line."""
    from mirrorstack.model.spec import Validation
    from mirrorstack.platforms.descriptions import ExecutorPods
    from mirrorstack.validation.executor_pods import executor_pods_conf
    pods = ExecutorPods(NAMESPACE, IMAGE, "/t.json", "100m")
    tuned = Validation(master=MASTER, jvm_options=["-XX:TieredStopAtLevel=1", "-Xss1m"])
    assert executor_pods_conf(tuned, pods)["spark.executor.extraJavaOptions"] == "-XX:TieredStopAtLevel=1 -Xss1m"
    assert "spark.executor.extraJavaOptions" not in executor_pods_conf(Validation(master=MASTER), pods)
    assert "SPARK_JAVA_OPT_" in EXECUTOR_SCRIPT and '"${java_options[@]}"' in EXECUTOR_SCRIPT
