"""The SparkValidationJob resource under Pulumi mocks on all three platforms,
its job input (components/validation/job_config.py) and the stack output made
from a report. The local resource's real runs are in
tests/integration/test_validation_resource.py."""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import time
import zipfile
from pathlib import Path

import kubernetes_validate
import pytest

from mirrorstack.mm2.flows import CONNECT_STORAGE_TOPICS, DEFAULT_TOPICS_EXCLUDE, NEVER_REPLICATED_GROUPS
from mirrorstack.spark.config import BadInput, parse_config

from mirrorstack import toolchain
from mirrorstack.validation.job_config import validation_job_config, validation_summary
from mirrorstack.model.spec import Images, TopologyError, load_topology
from mirrorstack.platforms.docker.platform import DockerPlatform
from mirrorstack.platforms.kubernetes.manifests import KUBERNETES_VERSION
from mirrorstack.platforms.kubernetes.platform import KubernetesPlatform
from mirrorstack.platforms.local.platform import LocalPlatform
from mirrorstack.validation.package import ENTRY_SCRIPT, ZIP_NAME, job_package, job_zip
from mirrorstack.versions import spark_version
from tests.support.mocked_runs import JOB
from tests.support.pulumi_mocks import RecordingMocks, aggregation_topology, deploy, ints

SERVERS = {"us": "us:9092", "uk": "uk:9092", "central": "central:9092"}


def topology(**validation):
    data = {"clusters": {"us": {}, "uk": {}, "central": {}},
            "flows": [{"sources": ["us", "uk"], "target": "central", "topics": ["orders", "clicks.*"],
                       "topics_exclude": ["clicks\\.tmp"], "replication_policy": "identity"}],
            "validation": validation}
    return load_topology(data)


# ------------------------------------------------------------------ the job's input

def test_job_config_carries_each_flows_own_patterns_and_checkpoints():
    config = validation_job_config(topology(wait_seconds=30, tolerance={"duplicates": 5}), SERVERS,
                                   {"us": {"security.protocol": "SSL"}})
    us, uk = config["flows"]
    # The flow crosses as its description, beside what only the job needs.
    (flow,) = load_topology({"clusters": {"us": {}, "central": {}}, "flows": [{
        "source": "us", "target": "central", "topics": ["orders", "clicks.*"], "topics_exclude": ["clicks\\.tmp"],
        "replication_policy": "identity"}]}).flows
    assert us == {"flow": flow.description().to_dict(), "source_bootstrap": "us:9092",
                  "target_bootstrap": "central:9092", "source_client": {"security.protocol": "SSL"},
                  "groups_required": False}
    # What the job reads from it: the patterns, what MM2 leaves out, the checkpoints and offset syncs.
    job_us, job_uk = parse_config(config).flows
    assert (job_us.name, job_us.source_bootstrap, job_us.target_bootstrap, job_us.source_alias,
            job_us.target_alias, job_us.policy, job_us.separator, job_us.topic_patterns, job_us.topics_exclude,
            job_us.source_client, job_us.checkpoints_topic, job_us.groups, job_us.groups_exclude,
            job_us.groups_required, job_us.offset_syncs_topic) == (
        "us->central", "us:9092", "central:9092", "us", "central", "identity", ".", ("orders", "clicks.*"),
        (*DEFAULT_TOPICS_EXCLUDE, *CONNECT_STORAGE_TOPICS, "clicks\\.tmp"), {"security.protocol": "SSL"},
        "us.checkpoints.internal", (".*",), NEVER_REPLICATED_GROUPS, False, "mm2-offset-syncs.us.internal")
    assert job_uk.checkpoints_topic == "uk.checkpoints.internal" and "source_client" not in uk
    assert config["wait_seconds"] == 30
    # the default window: the last hour of records; no minimum
    assert (config["window_seconds"], config["min_records"]) == (3600, 0)
    # no limit is spelled "unlimited": a null would be dropped on its way through the engine
    # (in_flight's default is bounded by the rate the targets took records during the wait)
    assert config["tolerance"] == {"missing": 0, "duplicates": 5, "extras": 0, "out_of_order": 0,
                                   "in_flight": "wait-rate", "lost": 0, "purged": 0}


def test_a_running_stacks_flat_config_is_still_read_as_the_same_flows():
    """A stack deployed before flows crossed as descriptions keeps its job's flat config (a CronJob's
    Secret, a Job resource's inputs): the job reads it as the same flows it reads from today's."""
    old_shape = {"flows": [
        {"name": f"{src}->central", "source_bootstrap": f"{src}:9092", "target_bootstrap": "central:9092",
         "source_alias": src, "target_alias": "central", "policy": "identity", "separator": ".",
         "topic_patterns": ["orders", "clicks.*"],
         "topics_exclude": [*DEFAULT_TOPICS_EXCLUDE, *CONNECT_STORAGE_TOPICS, "clicks\\.tmp"],
         **({"source_client": {"security.protocol": "SSL"}} if src == "us" else {}),
         "checkpoints_topic": f"{src}.checkpoints.internal", "groups": [".*"],
         "groups_exclude": list(NEVER_REPLICATED_GROUPS), "groups_required": False,
         "offset_syncs_topic": f"mm2-offset-syncs.{src}.internal"} for src in ("us", "uk")],
        "wait_seconds": 120}
    new_shape = validation_job_config(topology(), SERVERS, {"us": {"security.protocol": "SSL"}})
    assert "source_alias" not in new_shape["flows"][0]

    def job_view(flow):  # the plan's compression is not the job's concern (the flat form has none)
        return dataclasses.replace(flow, description=dataclasses.replace(flow.description, compression=None))
    assert [job_view(f) for f in parse_config(new_shape).flows] == parse_config(old_shape).flows
    assert parse_config(new_shape).groups == parse_config(old_shape).groups


def test_a_described_flow_the_job_cannot_read_is_refused_naming_the_field():
    config = validation_job_config(topology(), SERVERS)
    config["flows"][0]["flow"]["topics"] = "orders"
    config["flows"][1]["flow"]["policy"] = "identity"
    with pytest.raises(BadInput) as refused:
        parse_config(config)
    assert refused.value.problems == ["flows[0].flow: topics: must be a list of regexes",
                                      "flows[1].flow: unknown field(s) policy (known: name, source, target, topics, "
                                      "topics_exclude, groups, groups_exclude, replication_policy, separator, "
                                      "sync_topic_configs, checkpoints, compression, exactly_once, heartbeats, "
                                      "sync_group_offsets, sync_topic_acls, config_sync_seconds, tasks_max, "
                                      "refresh_seconds, throughput, overrides, connector_names, take_over)"]


@pytest.mark.parametrize("given, sent", [("unlimited", "unlimited"), (7, 7), ("wait-rate", "wait-rate")])
def test_in_flight_is_a_number_unlimited_or_bounded_by_the_waits_rate(given, sent):
    from mirrorstack.spark.config import parse_config
    config = validation_job_config(topology(tolerance={"in_flight": given}), SERVERS, {})
    assert config["tolerance"]["in_flight"] == sent
    assert parse_config(config).tolerance["in_flight"] == (None if sent == "unlimited" else sent)


def test_job_config_is_valid_input_for_the_job():
    from mirrorstack.spark.config import parse_config
    parsed = parse_config(validation_job_config(topology(), {k: f"{k}.example:9092" for k in SERVERS}))
    assert [f.topic_patterns for f in parsed.flows] == [("orders", "clicks.*")] * 2
    assert (parsed.window_seconds, parsed.min_records) == (3600, 0)
    parsed = parse_config(validation_job_config(topology(window="2d", min_records=10), SERVERS))
    assert (parsed.window_seconds, parsed.min_records) == (2 * 86400, 10)


def test_window_all_checks_the_whole_history():
    config = validation_job_config(topology(window="all"), SERVERS)
    assert "window_seconds" not in config  # absent (not null, which the engine drops): the whole history
    from mirrorstack.spark.config import parse_config
    assert parse_config(config).window_seconds is None


def test_validation_flows_selects_and_checkpoints_off_means_no_failover():
    t = load_topology({"clusters": {"a": {}, "b": {}, "c": {}},
                       "flows": [{"source": "a", "target": "b", "checkpoints": False}, {"source": "a", "target": "c"}],
                       "validation": {"flows": ["a->b"]}})
    config = validation_job_config(t, {"a": "a:1", "b": "b:1", "c": "c:1"})
    (only,) = parse_config(config).flows
    assert only.name == "a->b" and only.checkpoints_topic is None and only.groups is None


@pytest.mark.parametrize("validation, expected", [
    ({"flows": ["us->nowhere"]}, "validation.flows[0]: no flow named 'us->nowhere'; fix: use one of"),
    ({"flows": []}, "validation.flows: empty"),
    ({"schedule": "*/30 * * * *"}, "validation.schedule: a CronJob needs platform kubernetes"),
    ({"driver_memory": "lots"}, "validation.driver_memory"),
    ({"wait_seconds": -1}, "validation.wait_seconds"),
    ({"tolerance": {"missing": -1}}, "validation.tolerance.missing"),
    ({"tolerance": {"typo": 1}}, "validation.tolerance.typo"),
    ({"reportonly": True}, "validation.reportonly"),
    ({"window": "forever"}, "validation.window"),
    ({"window": "0h"}, "validation.window"),
    ({"min_records": -1}, "validation.min_records"),
    ({"jvm_options": ["-Xmx4g"]}, "validation.jvm_options: '-Xmx4g' is not an option mirrorstack "
                                  "passes on; fix: use -XX:, -Xms, -Xss, -Xlog: or -D options, one per item, "
                                  "without spaces (the heap is `validation.driver_memory`"),
    ({"jvm_options": ["-XX:+UseSerialGC -XX:TieredStopAtLevel=1"]}, "validation.jvm_options"),
    ({"jvm_options": ["-Dkafka.password=x"]}, "validation.jvm_options: '-Dkafka.password' looks like a"),
    ({"master": "spark://master"}, "validation.master: 'spark://master' is not a Spark master; fix: `local[N]`"),
    ({"master": "local[0]"}, "validation.master: 'local[0]' is not a Spark master"),
    ({"master": "sc://connect:15002/;token=abc"}, "validation.master: 'sc://connect:15002/;token=abc': a Spark "
                                                 "Connect endpoint is `sc://host` or `sc://host:port`"),
    ({"master": "sc://"}, "validation.master: 'sc://': a Spark Connect endpoint is"),
    ({"master": "k8s://https://api:6443"}, "validation.master: 'k8s://https://api:6443': the job's driver runs in "
                                           "the stack's own cluster and starts its executors there, through the API "
                                           "server's in-cluster name; fix: `k8s://https://kubernetes.default.svc`"),
    ({"master": "k8s://https://kubernetes.default.svc"}, "validation.master: k8s://https://kubernetes.default.svc: "
     "executor pods need the job's driver in a cluster; fix: use platform kubernetes"),
    ({"executor_instances": 3}, "validation.executor_instances: sizes a cluster's executors, and `local[2]` runs "
                                "the job in its driver"),
    ({"master": "spark://m:7077", "executor_instances": 3}, "validation.executor_instances: sizes a cluster's "
     "executors, and `spark://m:7077` runs the job on a standalone cluster, which executor_instances does not size "
     "(max_cores does)"),
    ({"executor_memory": "1G"}, "validation.executor_memory"),
    ({"executor_memory": "2g"}, "validation.executor_memory: sizes a cluster's executors, and `local[2]` runs the "
                                "job in its driver; fix: remove it, or set validation.master to a cluster master"),
    ({"max_cores": 2}, "validation.max_cores: sizes a cluster's executors"),
    ({"master": "sc://connect:15002", "executor_cores": 1}, "validation.executor_cores: sizes a cluster's executors, "
     "and `sc://connect:15002` runs the job on the server's own executors; fix: remove it"),
    ({"executor_cores": 0}, "validation.executor_cores"),
    ({"max_cores": 0}, "validation.max_cores"),
    ({"executor_wait_seconds": 0}, "validation.executor_wait_seconds"),
    ({"submit": "yourself", "master": "spark://m:7077"}, "validation.master: the job you submit runs where your "
                                                         "spark-submit says, when you say; fix: remove it"),
    ({"submit": "later"}, "validation.submit"),
    ({"report_within_hours": 0}, "validation.report_within_hours"),
])
def test_bad_validation_settings_name_the_field(validation, expected):
    with pytest.raises(TopologyError) as info:
        topology(**validation)
    assert any(p.startswith(expected) for p in info.value.problems), info.value.problems


# ------------------------------------------------------------------ the stack output

def report(**changes):
    failover = [{"flow": "us->central", "consumer_group": "app", "lost": 0, "reread": 40},
                {"flow": "us->central", "consumer_group": "app-.*", "lost": 0, "reread": 0, "unmatched_regex": True}]
    base = {"status": "passed", "passed": True, "failures": [], "duration_seconds": 12.5, "records_checked": 15,
            "window": {"seconds": 3600, "since": "2026-11-24T20:00:00+00:00", "since_ms": 1795982400000},
            "groups": [{"extras": 2, "failover": failover}, {"extras": 1, "failover": [
                {"flow": "us->central", "consumer_group": "app", "lost": 1, "reread": 2}]}],
            "flows": [{"name": "us->central", "topics": [
                {"topic": "orders", "source_records": 10, "matched": 9, "missing": 1, "in_flight": 0,
                 "duplicates": 3, "out_of_order": 0},
                {"topic": "clicks", "source_records": 5, "matched": 5, "missing": 0, "in_flight": 0,
                 "duplicates": 0, "out_of_order": 1}]},
                {"name": "uk->central", "topics": []}]}
    return {**base, **changes}


def test_summary_totals_per_flow_and_failover_per_group():
    summary = validation_summary(report())
    assert summary["passed"] is True and summary["target_topics"] == 2 and summary["extras"] == 3
    assert summary["status"] == "passed" and summary["records_checked"] == 15
    assert summary["window"] == {"seconds": 3600, "since": "2026-11-24T20:00:00+00:00"}
    assert summary["flows"]["us->central"] == {
        "records_checked": 15, "source_records": 15, "matched": 14, "missing": 1, "in_flight": 0, "duplicates": 3, "out_of_order": 1,
        "purged": 0, "topics": ["clicks", "orders"], "failover": {"app": {"lost": 1, "reread": 42}}}
    assert summary["flows"]["uk->central"]["source_records"] == 0


def test_summary_of_a_job_that_could_not_run():
    assert validation_summary({"passed": False, "exit_code": 3, "error": "boom"}) == {
        "status": "error", "passed": False, "error": "boom", "flows": {}}


def test_summary_of_a_run_that_checked_nothing_is_no_pass():
    summary = validation_summary(report(status="nothing-checked", passed=False, records_checked=0, groups=[],
                                        flows=[{"name": "us->central", "topics": []}]))
    assert (summary["status"], summary["passed"], summary["records_checked"]) == ("nothing-checked", False, 0)


# ------------------------------------------------------------------ the resource graphs

@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("local")
    return deploy(lambda: LocalPlatform("aggregation", str(folder))), folder


def test_local_runs_the_job_file_with_the_stacks_flows(local_run):
    (mocks, built), folder = local_run
    job = mocks.of_type("pulumi-python:dynamic")[JOB]
    assert job["job_file"] == str(ENTRY_SCRIPT)
    # Covers the package's zip too: a change to any module re-runs the job.
    assert job["job_sha256"] == job_package().sha256 != hashlib.sha256(ENTRY_SCRIPT.read_bytes()).hexdigest()
    assert job["workdir"] == str(folder.resolve() / JOB)
    assert job["jars"] == ",".join(str(j) for j in toolchain.spark_kafka_jars())
    assert (job["report_only"], job["run_id"], job["driver_memory"], job["master"]) == ("false", "", "1g", "local[2]")
    flows = {f["flow"]["name"]: f for f in job["config"]["flows"]}
    assert set(flows) == {"us->central", "uk->central"}
    assert flows["us->central"]["source_bootstrap"] == built["clusters"]["us"]
    assert flows["us->central"]["target_bootstrap"] == built["clusters"]["central"]
    assert flows["uk->central"]["flow"]["topics"] == ["orders", "clicks.*"]
    assert int(job["timeout_seconds"]) > job["config"]["wait_seconds"] == 60


def test_run_id_from_stack_config_overrides_the_topology(tmp_path):
    import pulumi
    from mirrorstack.args import ReplicationTopologyArgs
    from mirrorstack.topology import ReplicationTopology
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="mirrorstack", stack="aggregation", preview=False)

    @pulumi.runtime.test
    def program():
        t = ReplicationTopology("aggregation", ReplicationTopologyArgs(
            topology=aggregation_topology(), platform=LocalPlatform("aggregation", str(tmp_path)),
            stack="aggregation", validation_run_id="2026-11-22"))
        return t.validation_output
    program()
    assert mocks.of_type("pulumi-python:dynamic")[JOB]["run_id"] == "2026-11-22"


@pytest.fixture(scope="module")
def docker_run():
    return deploy(lambda: DockerPlatform("aggregation"))


def test_docker_runs_the_official_spark_image_once_with_uploaded_jars(docker_run):
    mocks, _ = docker_run
    job = mocks.of_type("docker:index/container:Container")[JOB]
    assert job["image"] == f"apache/spark:{spark_version()}-python3"  # the mocked RemoteImage's id is its name
    assert (job["mustRun"], job["attach"], job["logs"], job["restart"]) == (False, True, True, "no")
    assert job["networksAdvanced"] == [{"name": "mirrorstack-aggregation"}]
    uploads = {u["file"]: u for u in job["uploads"]}
    assert uploads["/opt/mirrorstack/validation/validate_replication.py"]["content"] == ENTRY_SCRIPT.read_text()
    flows = json.loads(uploads["/opt/mirrorstack/validation/flows.json"]["content"])["flows"]
    assert {f["source_bootstrap"] for f in flows} == {"us-broker-0:9092", "uk-broker-0:9092"}  # in-network
    jars = toolchain.spark_kafka_jars()
    # Uploaded where an image built for mirrorstack holds them (the kubernetes job reads them there).
    assert {uploads[f"/opt/mirrorstack/lib/spark-kafka/{j.name}"]["source"] for j in jars} == {str(j) for j in jars}
    bound, argv = job["command"][:3], job["command"][3:]  # `up` waits for it: bounded, as on kubernetes
    assert bound == ["timeout", "--kill-after=30", "7200"]
    assert argv[0] == "/opt/spark/bin/spark-submit" and "/opt/mirrorstack/validation/validate_replication.py" in argv
    assert "--print-report" in argv  # the report comes back on its output
    assert argv[argv.index("--jars") + 1] == ",".join(f"/opt/mirrorstack/lib/spark-kafka/{j.name}" for j in jars)
    assert argv[argv.index("--offsets-via") + 1] == "spark"  # no confluent_kafka in the image
    assert "--report-only" not in argv and "--packages" not in argv
    assert "MIRRORSTACK_RUN_ID=" in job["envs"]
    # The job's package is uploaded as a zip beside the entry script and given to --py-files.
    names = set(zipfile.ZipFile(io.BytesIO(job_zip())).namelist())
    assert names >= {f"mirrorstack/spark/{m}.py" for m in ("config", "reconcile", "cli")} | {"mirrorstack/mm2/flows.py"}
    assert base64.b64decode(uploads[f"/opt/mirrorstack/validation/{ZIP_NAME}"]["contentBase64"]) == job_zip()
    assert argv[argv.index("--py-files") + 1] == f"/opt/mirrorstack/validation/{ZIP_NAME}"
    assert argv.index("--py-files") < argv.index("/opt/mirrorstack/validation/validate_replication.py")


def test_validation_jvm_options_reach_the_driver_on_every_platform(tmp_path, monkeypatch):
    """spark-submit (docker, kubernetes) gets them as --driver-java-options; the local job as
    --java-options after the class-data archive, so they win over its own JIT choice."""
    from mirrorstack.platforms.local import spark_job
    from mirrorstack.validation.job_config import spark_submit_argv
    settings = topology(jvm_options=["-XX:TieredStopAtLevel=1", "-Dx=y"]).validation
    argv = spark_submit_argv(settings, job_path="/j.py", config_path="/f.json")
    assert argv[argv.index("--driver-java-options") + 1] == "-XX:TieredStopAtLevel=1 -Dx=y"
    assert argv.index("--driver-java-options") < argv.index("/j.py")
    assert "--driver-java-options" not in spark_submit_argv(topology().validation, job_path="/j.py",
                                                            config_path="/f.json")
    monkeypatch.setattr(toolchain, "spark_archive_option", lambda: "-XX:SharedArchiveFile=/a.jsa")
    assert spark_job._java_options("-XX:TieredStopAtLevel=1") == [
        "--java-options=-XX:SharedArchiveFile=/a.jsa -XX:TieredStopAtLevel=1"]
    assert spark_job._java_options(None) == ["--java-options=-XX:SharedArchiveFile=/a.jsa"]
    monkeypatch.setattr(toolchain, "spark_archive_option", lambda: None)
    assert spark_job._java_options(None) == []
    # on the resource only when set: a stack deployed before the option existed sees no change
    mocks, _ = deploy(lambda: LocalPlatform("aggregation", str(tmp_path)))
    assert "java_options" not in mocks.of_type("pulumi-python:dynamic")[JOB]
    tuned = aggregation_topology().model_copy(deep=True)
    tuned.validation.jvm_options = ["-XX:TieredStopAtLevel=1"]
    mocks, _ = deploy(lambda: LocalPlatform("aggregation", str(tmp_path)), tuned)
    assert mocks.of_type("pulumi-python:dynamic")[JOB]["java_options"] == "-XX:TieredStopAtLevel=1"
    assert "java_options" in spark_job.RUN_KEYS  # a change runs the job again, as on docker and kubernetes


K8S_SPARK_IMAGE = "registry.example.com/mirrorstack/spark:1"  # carries the spark-sql-kafka jars


@pytest.fixture(scope="module")
def k8s_run():
    t = aggregation_topology()
    t = t.model_copy(update={"platform": "kubernetes", "images": Images(spark=K8S_SPARK_IMAGE),
                             "validation": t.validation.model_copy(
                                 update={"schedule": "0 * * * *", "report_only": True, "run_id": "r1"})})
    return deploy(lambda: KubernetesPlatform("aggregation", images=t.images), topology=t)


def _manifests(built, kind):
    return {m["metadata"]["name"]: ints(m) for m in built["manifests"] if m["kind"] == kind}


def test_kubernetes_job_and_cronjob_run_the_same_pod(k8s_run):
    _, built = k8s_run
    (job,) = _manifests(built, "Job").values()
    (cron,) = _manifests(built, "CronJob").values()
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]
    assert cron["spec"]["jobTemplate"]["spec"]["template"] == pod
    assert cron["spec"]["schedule"] == "0 * * * *" and cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["metadata"]["annotations"]["mirrorstack.io/run-id"] == "r1"
    (container,) = pod["spec"]["containers"]
    assert container["image"] == K8S_SPARK_IMAGE
    argv = container["command"]
    # spark-sql-kafka from the image (the jars `make spark-kafka` installed): nothing fetched when the pod starts.
    jars = toolchain.spark_kafka_jars()
    assert argv[argv.index("--jars") + 1] == ",".join(f"/opt/mirrorstack/lib/spark-kafka/{j.name}" for j in jars)
    assert "--packages" not in argv and not any("ivy" in a for a in argv)
    assert argv[-1] == "--report-only"  # report_only: the Job succeeds, the report says FAILED
    assert container["resources"]["limits"]["memory"] == f"{1024 + 768}Mi"


def test_kubernetes_flows_go_in_a_secret_the_job_file_in_a_configmap(k8s_run):
    mocks, built = k8s_run
    (secret,) = _manifests(built, "Secret").values()
    flows = json.loads(secret["stringData"]["flows.json"])["flows"]
    assert flows[0]["source_bootstrap"] == "us-broker-0.mirrorstack-aggregation.svc.cluster.local:9092"
    data = _manifests(built, "ConfigMap")[f"{JOB}-job"]["data"]
    assert data["validate_replication.py"] == ENTRY_SCRIPT.read_text()
    # The package's zip beside it in the same ConfigMap (binary data, mounted at .../job), given to --py-files.
    binary = _manifests(built, "ConfigMap")[f"{JOB}-job"]["binaryData"]
    assert base64.b64decode(binary[ZIP_NAME]) == job_zip()
    (job,) = _manifests(built, "Job").values()
    argv = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert argv[argv.index("--py-files") + 1] == f"/opt/mirrorstack/validation/job/{ZIP_NAME}"
    assert argv.index("--py-files") < argv.index("/opt/mirrorstack/validation/job/validate_replication.py")
    # The SDK marks Secret data secret: the state holds it encrypted.
    registered = [r for r in mocks.resources if r.typ == "kubernetes:core/v1:Secret"][0]
    assert "4dabf18193072939515e22adb298388d" in json.dumps(registered.inputs["stringData"])


@pytest.mark.parametrize("version", [KUBERNETES_VERSION, kubernetes_validate.latest_version()])
def test_kubernetes_validation_manifests_validate_strictly(k8s_run, version):
    _, built = k8s_run
    for kind in ("Secret", "ConfigMap", "Job", "CronJob"):
        for manifest in _manifests(built, kind).values():
            kubernetes_validate.validate(manifest, desired_version=version, strict=True)


# ------------------------------------------------------------------ the local provider's contract

from mirrorstack.platforms.local.spark_job import LocalSparkJobProvider, ValidationFailed  # noqa: E402

PASSED_REPORT = {"passed": True, "exit_code": 0, "failures": [], "duration_seconds": 1.0, "groups": [],
                 "flows": [{"name": "a->b", "topics": []}]}
FAILED_REPORT = {**PASSED_REPORT, "passed": False, "exit_code": 1, "failures": ["orders on b: extras 3 > tolerance 0"]}


def local_provider() -> LocalSparkJobProvider:
    """The provider as the local platform makes it for the validation job."""
    job = job_package()
    return LocalSparkJobProvider(job.output, job.make_zip, job.zip_name)


def fake_job(tmp_path, body: str) -> str:
    """A stand-in for the job file: the provider's process handling, not Spark, is under test."""
    script = tmp_path / "job.py"
    script.write_text("import json, sys, time\nout = sys.argv[sys.argv.index('--out') + 1]\n" + body)
    return str(script)


def props(tmp_path, job_file: str, **changes) -> dict:
    import sys
    return {"name": "validation-job", "job_file": job_file, "job_sha256": "x", "config": {"flows": [{"name": "a->b"}]},
            "workdir": str(tmp_path / "work"), "jars": "", "python": sys.executable,
            "report_only": "false", "run_id": "", "driver_memory": "1g", "master": "local[2]",
            "timeout_seconds": "60", **changes}


def test_provider_returns_the_summary_and_keeps_the_config_private(tmp_path, capsys):
    job = fake_job(tmp_path, f"print('validate_replication: progress', file=sys.stderr, flush=True)\n"
                             f"json.dump({PASSED_REPORT!r}, open(out, 'w'))\n")
    # tolerances come back from the engine as floats; the job gets integers
    created = local_provider().create(props(tmp_path, job, config={"flows": [{"name": "a->b"}],
                                                                          "tolerance": {"missing": 0.0}}))
    assert created.outs["passed"] is True and created.outs["report"]["flows"]["a->b"]["source_records"] == 0
    assert created.outs["report_file"] == str(tmp_path / "work" / "report.json")
    config = tmp_path / "work" / "flows.json"
    assert config.read_text().count('"missing": 0\n') == 1
    assert config.stat().st_mode & 0o777 == 0o600  # client settings may hold credentials
    assert "mirrorstack: validate_replication: progress" in capsys.readouterr().err


def test_provider_gives_the_driver_its_class_archive_when_one_was_made(tmp_path, monkeypatch):
    job = fake_job(tmp_path, f"open(out + '.argv', 'w').write(json.dumps(sys.argv))\n"
                             f"json.dump({PASSED_REPORT!r}, open(out, 'w'))\n")
    argv = lambda: json.loads((tmp_path / "work" / "report.json.argv").read_text())  # noqa: E731
    monkeypatch.setenv("MIRRORSTACK_TOOLS_DIR", str(tmp_path / "tools"))
    local_provider().create(props(tmp_path, job))
    assert not [a for a in argv() if a.startswith("--java-options")]  # none made: Spark as it comes
    archive = tmp_path / "tools" / "class-archives" / "spark-driver.jsa"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"jsa")
    local_provider().create(props(tmp_path, job))
    assert f"--java-options=-XX:SharedArchiveFile={archive}" in argv()


def test_provider_fails_on_a_failed_validation_unless_report_only(tmp_path):
    job = fake_job(tmp_path, f"json.dump({FAILED_REPORT!r}, open(out, 'w'))\nsys.exit(1)\n")
    with pytest.raises(ValidationFailed, match="extras 3 > tolerance 0"):
        local_provider().create(props(tmp_path, job))
    outs = local_provider().create(props(tmp_path, job, report_only="true")).outs
    assert outs["passed"] is False and outs["report"]["failures"] == FAILED_REPORT["failures"]


def test_provider_reports_a_job_that_could_not_run_with_its_output(tmp_path):
    job = fake_job(tmp_path, "print('error: the validation could not run: Kafka down', file=sys.stderr)\nsys.exit(3)\n")
    with pytest.raises(RuntimeError, match=r"could not run \(exit 3\)[\s\S]*Kafka down"):
        local_provider().create(props(tmp_path, job, report_only="true"))


def test_provider_stops_a_job_over_its_time_and_its_children(tmp_path):
    import os
    pid_file = tmp_path / "child.pid"
    job = fake_job(tmp_path, "import subprocess\n"
                             f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                             f"open({str(pid_file)!r}, 'w').write(str(child.pid))\ntime.sleep(60)\n")
    with pytest.raises(RuntimeError, match="ran over 2s"):
        local_provider().create(props(tmp_path, job, timeout_seconds="2"))
    child = int(pid_file.read_text())
    for _ in range(50):  # the child (Spark's JVM, in real runs) went with the job's session
        if not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]:
            break
        time.sleep(0.1)
    else:
        os.kill(child, 9)
        raise AssertionError("the job's child survived the timeout")


def test_provider_runs_again_only_when_inputs_or_run_id_change(tmp_path):
    provider, old = local_provider(), props(tmp_path, "job.py")
    ran = {**old, "report": {"passed": True}, "passed": True, "report_file": "r.json"}
    assert provider.diff("id", ran, old).changes is False
    for key, value in (("run_id", "2026-11-22"), ("report_only", "true"), ("job_sha256", "y"),
                       ("config", {"flows": [{"name": "a->c"}]}), ("driver_memory", "2g")):
        diff = provider.diff("id", ran, {**old, key: value})
        assert diff.changes is True and not diff.replaces, key


def test_docker_job_outcome_is_the_printed_reports_summary_or_up_fails_naming_the_container():
    from mirrorstack.mm2.validation_reports import printed_line
    from mirrorstack.platforms.docker.platform import _job_outcome
    from mirrorstack.validation.outcome import JOB_OUTPUT
    from mirrorstack.spark.report import summary_text
    from tests.support.job_reports import report
    passed, failed = report(failures=()), report()
    logs = lambda r: "\n".join(["26/01/01 INFO SparkContext: Running", *summary_text(r).splitlines(),  # noqa: E731
                                 printed_line(r)])
    outs = _job_outcome("validation-job", "c", 0, logs(passed), JOB_OUTPUT)
    assert (outs["logs"], outs["status"], outs["records_checked"]) == ("docker logs c", "passed", 650)
    assert outs["flows"]["us->central"]["duplicates"] == 27
    # report_only: exit 0 on a failed validation, the output says so
    assert _job_outcome("validation-job", "c", 0, logs(failed), JOB_OUTPUT)["status"] == "failed"
    with pytest.raises(RuntimeError) as said:
        _job_outcome("validation-job", "c", 1, logs(failed), JOB_OUTPUT)
    assert str(said.value).startswith("validation-job: replication validation FAILED")
    assert "`docker logs c`" in str(said.value) and failed["failures"][0] in str(said.value)
    with pytest.raises(RuntimeError, match=r"(?s)could not run \(exit 124\) \(it did not end within 7200s and was "
                                           r"stopped\).*waiting.*the whole log: `docker logs c`"):
        _job_outcome("validation-job", "c", 124, "validate_replication: waiting", JOB_OUTPUT)
    with pytest.raises(RuntimeError, match=r"(?s)could not run \(exit 2\).*bad input: x.*the whole log: `docker logs c`"):
        _job_outcome("validation-job", "c", 2, "bad input: x", JOB_OUTPUT)
