"""The continuous validation in a stack, without Kafka: the model's fields and rules, the resource
graph under Pulumi mocks (the validator a service beside the flows, scraped by Prometheus, with
its alert rules and dashboard row), its alert rules under promtool's real rule engine, and its
exporter's names and per-flow RPO."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
import yaml

from mirrorstack.model.spec import TopologyError, load_topology
from mirrorstack.monitoring import alerts, metrics
from mirrorstack.monitoring.dashboards import dashboard_queries, overview_dashboard
from mirrorstack.platforms.containers import IMAGE_SPARK_STATE_DIR, PYTHON_SERVICE_PORT, image_spark_jars
from mirrorstack.platforms.docker.platform import DockerPlatform
from mirrorstack.platforms.local.platform import LocalPlatform
from mirrorstack.spark import stream_metrics
from mirrorstack.spark.config import parse_config
from mirrorstack.spark.stream_plan import Plan
from mirrorstack.spark.spark_io import session_conf
from mirrorstack.spark.streaming import claim_checkpoint, few_malloc_arenas, hold_lock, parse_args, service_args
from mirrorstack.validation.continuous import MODULE, SERVICE
from tests.support.promtool import promtool
from tests.support.pulumi_mocks import deploy


def topology(platform="local", mode="continuous", monitoring=True, **flow):
    return load_topology({
        "platform": platform, "clusters": {"us": {}, "uk": {}, "central": {}},
        "flows": [{"source": "us", "target": "central", **flow}, {"source": "uk", "target": "central"}],
        "validation": {"mode": mode, "continuous": {"window_seconds": 30, "trigger_seconds": 2}},
        **({"monitoring": {}} if monitoring else {})})


@pytest.mark.parametrize("change, problem", [
    (dict(mode="once", rpo_seconds=60), "flows[0].rpo_seconds: the RPO is measured by the continuous validation"),
    (dict(monitoring=False, rpo_seconds=60), "flows[0].rpo_seconds: its alert is a rule of the stack's Prometheus; "
                                             "fix: add a `monitoring` section"),
    (dict(rpo_seconds=3), "flows[0].rpo_seconds: 3s is measured to within a batch (2s, "
                          "validation.continuous.trigger_seconds); fix: at least 4, or a shorter trigger"),
])
def test_bad_continuous_settings_are_refused_naming_the_field_and_the_fix(change, problem):
    with pytest.raises(TopologyError) as refused:
        topology(**change)
    assert problem in str(refused.value)


def test_window_and_trigger_are_bounded_by_the_schema():
    for bad in ({"window_seconds": 1}, {"trigger_seconds": 0.1}, {"driver_memory": "lots"}):
        with pytest.raises(TopologyError) as refused:
            load_topology({"platform": "local", "clusters": {"a": {}, "b": {}}, "flows": [{"source": "a", "target": "b"}],
                           "validation": {"mode": "continuous", "continuous": bad}})
        assert f"validation.continuous.{next(iter(bad))}" in str(refused.value)


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    folder = tmp_path_factory.mktemp("continuous")
    return deploy(lambda: LocalPlatform("continuous", str(folder)), topology(rpo_seconds=45), stack="continuous")


def test_the_validator_runs_beside_the_flows_and_prometheus_scrapes_it_with_its_alerts(graph):
    mocks, _ = graph
    services = mocks.of_type("pulumi-python:dynamic")
    validator = services[SERVICE]
    assert validator["argv"][1:3] == ["-m", MODULE] and validator["argv"][3].endswith(f"/{SERVICE}/config.json")
    config = json.loads(validator["files"]["config.json"])
    assert (config["window_seconds"], config["trigger_seconds"], config["driver_memory"]) == (30, 2, "1g")
    assert config["listen"].startswith("127.0.0.1:")
    # the platform's: this machine's jars, the state (its checkpoint) in the service's own folder
    assert any("spark-sql-kafka" in jar for jar in config["spark_jars"]), config["spark_jars"]
    assert config["state_dir"] == validator["argv"][3].rsplit("/", 1)[0]
    # the one-shot job's flows JSON, which the validator parses as the job does
    assert [f["flow"]["name"] for f in config["job"]["flows"]] == ["us->central", "uk->central"]
    assert [f.name for f in Plan(parse_config(config["job"], None).flows).flows] == ["us->central", "uk->central"]
    assert "validation-job" not in services  # mode continuous: `up` runs no one-shot job
    # it starts once the flows' connectors exist
    flows = {(t, n) for t, n in mocks.dependencies[("mirrorstack:dynamic:LocalService", SERVICE)]
             if t == "mirrorstack:mirror:MirrorMaker2"} if ("mirrorstack:dynamic:LocalService", SERVICE) in \
        mocks.dependencies else None
    prometheus = services["prometheus"]["files"]
    scraped = yaml.safe_load(prometheus["prometheus.yml"])["scrape_configs"]
    (job,) = [j for j in scraped if j["job_name"] == SERVICE]
    assert job["static_configs"] == [{"targets": [config["listen"]], "labels": {"role": "validator"}}]
    rules = {r["alert"]: r for r in yaml.safe_load(prometheus["alerts.yml"])["groups"][0]["rules"]}
    assert {alerts.MISSING_ALERT, alerts.VALIDATOR_DOWN_ALERT, alerts.VALIDATION_STALLED_ALERT} <= set(rules)
    rpo = rules[alerts.RPO_ALERT]  # only us->central has an objective
    assert rpo["expr"] == f'(max by (flow) ({metrics.DELIVERY_RPO_SECONDS}{{flow="us->central"}})) > 45'
    assert rpo["labels"] == {"severity": "critical", "flow": "us->central"}
    dashboard = json.loads(services["grafana"]["files"]["dashboards/mirrorstack-overview.json"])
    assert "Proof of delivery" in [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert flows is None or flows  # recorded where the mock engine records dependencies


def test_mode_both_runs_the_one_shot_job_too_and_once_runs_no_validator(tmp_path):
    mocks, _ = deploy(lambda: LocalPlatform("both", str(tmp_path / "both")), topology(mode="both"), stack="both")
    assert {SERVICE, "validation-job"} <= set(mocks.of_type("pulumi-python:dynamic"))
    mocks, _ = deploy(lambda: LocalPlatform("once", str(tmp_path / "once")), topology(mode="once"), stack="once")
    services = mocks.of_type("pulumi-python:dynamic")
    assert SERVICE not in services and "validation-job" in services
    rules = yaml.safe_load(services["prometheus"]["files"]["alerts.yml"])["groups"][0]["rules"]
    assert not {r["alert"] for r in rules} & {alerts.MISSING_ALERT, alerts.VALIDATOR_DOWN_ALERT}
    dashboard = json.loads(services["grafana"]["files"]["dashboards/mirrorstack-overview.json"])
    assert "Proof of delivery" not in [p["title"] for p in dashboard["panels"] if p["type"] == "row"]


def test_on_docker_the_validator_is_a_spark_image_container_keeping_its_checkpoint_in_the_work_folder():
    """The image's jars and its user's work folder (kept when the container restarts: the upload
    folder is root's); restarted unless stopped, its port not published, scraped in the network."""
    mocks, _ = deploy(lambda: DockerPlatform("both"), topology(platform="docker", mode="both"), stack="both")
    containers = mocks.of_type("docker:index/container:Container")
    validator = containers[SERVICE]
    assert validator["restart"] == "unless-stopped" and not validator.get("ports")
    (upload,) = [u for u in validator["uploads"] if u["file"].endswith(f"/{SERVICE}/config.json")]
    config = json.loads(upload["content"])
    assert config["spark_jars"] == image_spark_jars() and config["state_dir"] == IMAGE_SPARK_STATE_DIR
    assert config["listen"] == f"0.0.0.0:{PYTHON_SERVICE_PORT}"
    assert validator["command"][:4] == ["python3", "-B", "-m", MODULE]
    assert "validation-job" in containers  # mode both: the one-shot job too
    prometheus = [u for u in containers["prometheus"]["uploads"] if u["file"].endswith("prometheus.yml")]
    (job,) = [j for j in yaml.safe_load(prometheus[0]["content"])["scrape_configs"] if j["job_name"] == SERVICE]
    assert job["static_configs"][0]["targets"] == [f"{SERVICE}:{PYTHON_SERVICE_PORT}"]


def test_the_dashboard_row_queries_only_the_validators_series():
    extra = set(dashboard_queries(overview_dashboard(True))) - set(dashboard_queries(overview_dashboard()))
    assert len(extra) == 8 and all("mirrorstack_continuous_" in q for q in extra)


def test_monitoring_names_the_series_as_the_exporter_does():
    exported = {f"{stream_metrics.PREFIX}{k}_records_total" for k in stream_metrics.COUNTERS}
    exported |= {f"{stream_metrics.PREFIX}{k}" for k in ("latency_seconds", "rpo_seconds", "rpo_records",
                                                           "last_batch_timestamp_seconds")}
    written = {getattr(metrics, n) for n in dir(metrics) if n.startswith("DELIVERY_")}
    assert written == exported


def test_the_validator_reads_by_pattern_and_keeps_only_what_each_flow_copies():
    """Topics made after it starts are read (patterns); a target topic is checked only for the flows
    whose copies it holds, as MM2 names and picks them (internal and excluded topics are not)."""
    plan = Plan(parse_config({"flows": [
        {"flow": {"name": "us->central", "source": "us", "target": "central", "topics": ["orders.*"],
                  "topics_exclude": ["orders-old"]}, "source_bootstrap": "us:1", "target_bootstrap": "c:1"},
        {"flow": {"name": "uk->central", "source": "uk", "target": "central", "topics": ["payments"],
                  "replication_policy": "identity"}, "source_bootstrap": "uk:1", "target_bootstrap": "c:1"},
        {"flow": {"name": "us->dr", "source": "us", "target": "dr", "topics": [".*"]},
         "source_bootstrap": "us:1", "target_bootstrap": "dr:1"}]}, None).flows)
    assert plan.target_of == [0, 0, 1] and [t[0] for t in plan.targets] == ["c:1", "dr:1"]
    assert plan.target_pattern(0) == "(?:\\Qus.\\E(?:(?:orders.*)))|(?:(?:payments))"
    assert plan.claims(0, "us.orders-eu") == (0,) and plan.claims(0, "us.orders-old") == ()
    assert plan.claims(0, "payments") == (1,) and plan.claims(1, "us.payments") == (2,)
    # MM2's own topics are no copies: heartbeats, checkpoints, a cycle back to the source
    assert plan.claims(0, "heartbeats") == () and plan.claims(0, "us.checkpoints.internal") == ()
    assert plan.claims(1, "us.heartbeats") == ()
    assert plan.upstream(0, "us.orders") == "orders" and plan.upstream(0, "uk.orders") is None


def test_the_rpo_is_per_flow_feeding_a_target_topic():
    """Two flows merged into one target topic: each its own RPO, the counters summed; a flow with
    no topic yet has its RPO at 0 (its alert rule sees a series)."""
    plan = Plan(parse_config({"flows": [
        {"flow": {"name": n, "source": n[:2], "target": "central", "topics": ["orders"],
                  "replication_policy": "identity"}, "source_bootstrap": f"{n[:2]}:1", "target_bootstrap": "c:1"}
        for n in ("us->central", "uk->central")]}, None).flows)
    exporter = stream_metrics.Exporter(plan, log=lambda _: None)
    before = {(s.name, s.labels.get("flow")): s.value for f in exporter.collect() for s in f.samples}
    assert before[("mirrorstack_continuous_rpo_seconds", "uk->central")] == 0
    row = {"c": 0, "topic": "orders", "partition": 0, "confirmed": 5, "missing": 0, "duplicates": 0, "extras": 0,
           "rpo_records": 3, "rpo_seconds": 9.0, "rpo_by_source": [[0, 1, 9.0], [1, 2, 4.0]],
           "buckets": [5] + [0] * 12, "latency_sum": 0.1, "latency_max": 0.05, "missing_samples": [[1, 17, 5]]}
    said = []
    exporter.log = said.append
    exporter.take([row, {**row, "partition": 1, "rpo_by_source": [[1, 1, 7.0]], "missing_samples": []}])
    samples = {(s.name, s.labels.get("flow"), s.labels.get("topic")): s.value
               for f in exporter.collect() for s in f.samples}
    assert samples[("mirrorstack_continuous_rpo_seconds", "us->central", "orders")] == 9.0
    assert samples[("mirrorstack_continuous_rpo_seconds", "uk->central", "orders")] == 7.0
    assert samples[("mirrorstack_continuous_rpo_records", "uk->central", "orders")] == 3
    assert samples[("mirrorstack_continuous_confirmed_records_total", None, "orders")] == 10
    assert ("mirrorstack_continuous_rpo_seconds", "uk->central", "") not in samples  # the baseline went
    assert said == ["missing: uk->central:orders partition 0 offset 17 (timestamp 5) has no copy on orders "
                    "within the window"]


def test_the_alerts_fire_and_clear_under_prometheus_rule_engine(tmp_path):
    """promtool's own evaluation: a record missing fires at once and clears an hour later; an RPO
    above its objective fires while it is; a validator down 1 minute fires; its batches stopped."""
    flows = topology(rpo_seconds=45).flows
    (tmp_path / "alerts.yml").write_text(alerts.alert_rules_file(alerts.delivery_rules(flows, trigger_seconds=2)))
    check = promtool("check", "rules", str(tmp_path / "alerts.yml"))
    assert check.returncode == 0, check.stdout + check.stderr
    labels = 'target="central", topic="orders"'
    series = [
        {"series": f"{metrics.DELIVERY_MISSING}{{{labels}}}", "values": "0x10 2x90"},  # 2 missing at 10m
        {"series": f'{metrics.DELIVERY_RPO_SECONDS}{{{labels}, flow="us->central"}}', "values": "3x5 50x5 2x10"},
        {"series": 'up{role="validator", job="continuous-validation"}', "values": "1x20 0x10"},
        {"series": f"{metrics.DELIVERY_LAST_BATCH}", "values": "0+60x10 600x20"},
    ]

    def firing(name, at, *labels_):
        return {"eval_time": at, "alertname": name, "exp_alerts": list(labels_)}
    missing = {"exp_labels": {"severity": "critical", "target": "central", "topic": "orders"},
               "exp_annotations": {"summary": "2 record(s) for central/orders did not arrive within the validation "
                                              "window: the validator's log names each (source topic, partition, "
                                              "offset)"}}
    rpo = {"exp_labels": {"severity": "critical", "flow": "us->central"},
           "exp_annotations": {"summary": "Flow us->central: its oldest record not yet on the target is 50s old, "
                                          "above its RPO objective of 45s"}}
    down = {"exp_labels": {"severity": "critical", "role": "validator", "job": "continuous-validation"},
            "exp_annotations": {"summary": "The continuous validator is down: no record's delivery is being checked"}}
    stalled = {"exp_labels": {"severity": "warning"},
               "exp_annotations": {"summary": "The continuous validator's last batch ended 360s ago: its Spark "
                                              "query is stuck or failing (see its log)"}}
    (tmp_path / "test.yml").write_text(yaml.safe_dump({
        "rule_files": ["alerts.yml"], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": [
            firing(alerts.MISSING_ALERT, "9m"), firing(alerts.MISSING_ALERT, "11m", missing),
            firing(alerts.MISSING_ALERT, "69m", missing), firing(alerts.MISSING_ALERT, "71m"),
            firing(alerts.RPO_ALERT, "4m"), firing(alerts.RPO_ALERT, "7m", rpo), firing(alerts.RPO_ALERT, "12m"),
            firing(alerts.VALIDATOR_DOWN_ALERT, "20m"), firing(alerts.VALIDATOR_DOWN_ALERT, "22m", down),
            firing(alerts.VALIDATION_STALLED_ALERT, "9m"), firing(alerts.VALIDATION_STALLED_ALERT, "16m", stalled),
        ]}]}))
    run = promtool("test", "rules", str(tmp_path / "test.yml"))
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_stacks_validator_keeps_one_checkpoint_per_set_of_flows(tmp_path):
    """Its service config: the flows JSON never on the command line; a changed set of flows (Spark
    refuses a checkpoint whose sources changed) starts a new checkpoint and the old one goes."""
    job = {"flows": [{"flow": {"name": "a->b", "source": "a", "target": "b", "topics": ["x.*"]},
                      "source_bootstrap": "a:1", "target_bootstrap": "b:1"}]}
    config = tmp_path / "config.json"

    def args_for(job, **more):
        config.write_text(json.dumps({"job": job, "listen": "127.0.0.1:9406", "window_seconds": 30,
                                      "trigger_seconds": 2, "driver_memory": "2g",
                                      "spark_jars": ["/j/a.jar", "/j/b.jar"], **more}))
        return service_args(str(config))
    first = args_for(job)
    assert (first.metrics_host, first.metrics_port, first.window_seconds, first.trigger_seconds) == (
        "127.0.0.1", 9406, 30, 2)
    assert (first.driver_memory, first.jars, json.loads(first.config_json)) == ("2g", "/j/a.jar,/j/b.jar", job)
    assert first.checkpoint_dir == str(tmp_path / first.checkpoint_dir.rsplit("/", 1)[1])
    (tmp_path / first.checkpoint_dir.rsplit("/", 1)[1] / "offsets").mkdir(parents=True)
    assert args_for(job).checkpoint_dir == first.checkpoint_dir  # a restart goes on from it
    assert (tmp_path / first.checkpoint_dir.rsplit("/", 1)[1] / "offsets").is_dir()
    changed = args_for({"flows": [{**job["flows"][0], "flow": {**job["flows"][0]["flow"], "topics": ["y"]}}]})
    assert changed.checkpoint_dir != first.checkpoint_dir
    assert (tmp_path / first.checkpoint_dir.rsplit("/", 1)[1]).is_dir()  # kept until the folder's lock is held
    claim_checkpoint(changed).close()
    assert [p.name for p in tmp_path.glob("checkpoint-*")] == []  # the old one went; Spark makes the new one
    assert (tmp_path / "validator.lock").exists()
    # a platform whose config folder is read-only (a container's uploads, a ConfigMap) names a state folder
    state = tmp_path / "state"
    assert args_for(job, state_dir=str(state)).checkpoint_dir == str(state / first.checkpoint_dir.rsplit("/", 1)[1])


@pytest.mark.parametrize("validation, expected", [
    ({}, {}),  # local[2] in its own process
    ({"master": "local[4]"}, {}),
    ({"master": "spark://spark-master:7077", "executor_memory": "512m", "max_cores": 2, "executor_wait_seconds": 30},
     {"master": "spark://spark-master:7077", "executor_memory": "512m", "max_cores": 2, "executor_wait_seconds": 30}),
    ({"master": "sc://spark-connect:15002"}, {"master": "sc://spark-connect:15002"}),
])
def test_the_validator_runs_on_the_jobs_cluster_with_its_executor_sizes(tmp_path, validation, expected):
    """What the validator runs on, from the stack to its own arguments: the job's standalone cluster or
    Connect server; a checkpoint location they reach in place of its state folder."""
    document = {"platform": "local", "clusters": {"a": {}, "b": {}}, "flows": [{"source": "a", "target": "b"}],
                "validation": {"mode": "continuous", **validation,
                               "continuous": {"checkpoint_location": "hdfs://nn:8020/mirrorstack/"}}}
    mocks, _ = deploy(lambda: LocalPlatform("on-cluster", str(tmp_path / "stack")), load_topology(document),
                      stack="on-cluster")
    config = json.loads(mocks.of_type("pulumi-python:dynamic")[SERVICE]["files"]["config.json"])
    (tmp_path / "config.json").write_text(json.dumps({**config, "state_dir": str(tmp_path / "state")}))
    args = service_args(str(tmp_path / "config.json"))
    unset = {"master": None, "executor_memory": None, "executor_cores": None, "max_cores": None,
             "executor_wait_seconds": 60}
    assert {key: getattr(args, key) for key in unset} == {**unset, **expected}
    assert args.checkpoint_dir.startswith("hdfs://nn:8020/mirrorstack/checkpoint-")
    (tmp_path / "state" / "checkpoint-old").mkdir(parents=True)
    claim_checkpoint(args).close()  # the lock in the state folder; nothing there is the cluster's checkpoint
    assert (tmp_path / "state" / "checkpoint-old").is_dir() and (tmp_path / "state" / "validator.lock").exists()


def test_the_validators_jvms_start_with_few_malloc_arenas_unless_told_otherwise():
    """The driver's through this process's environment, the executors' through spark.executorEnv; a
    value already in the environment, or an executor setting given, wins."""
    base = ["--config", "flows.json", "--checkpoint-dir", "/tmp/c"]
    environ, args = {}, parse_args(base)
    few_malloc_arenas(args, environ)
    assert environ == {"MALLOC_ARENA_MAX": "2"}
    assert session_conf(args)["spark.executorEnv.MALLOC_ARENA_MAX"] == "2"
    environ, args = {"MALLOC_ARENA_MAX": "4"}, parse_args([*base, "--conf", "spark.executorEnv.MALLOC_ARENA_MAX=8"])
    few_malloc_arenas(args, environ)
    assert environ == {"MALLOC_ARENA_MAX": "4"} and session_conf(args)["spark.executorEnv.MALLOC_ARENA_MAX"] == "8"


def test_a_second_validator_on_one_state_folder_waits_for_the_first_to_stop(tmp_path):
    """A Deployment makes a deleted pod again before the old one is gone: two queries on one checkpoint
    would fail each other, so the second start waits (saying so) until the first process ends."""
    lock = tmp_path / "validator.lock"
    first = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                              "from mirrorstack.spark.streaming import hold_lock; "
                              f"held = hold_lock(Path({str(lock)!r})); print('held', flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "held"
        said, started = [], time.monotonic()
        threading.Timer(1.5, first.kill).start()  # the first process ends: its lock goes with it
        held = hold_lock(lock, say=said.append)
        assert first.poll() is not None and time.monotonic() - started >= 1.0
        assert said and "waiting for the validator before this one to stop" in said[0]
        held.close()
    finally:
        first.kill()
        first.wait()


def test_a_query_whose_connect_workers_python_came_late_starts_again_and_other_errors_do_not():
    """A Spark Connect server waits a fixed 10 s for foreachBatch's Python worker; on a loaded machine
    the start failed so (a fresh-clone suite run): it is tried again, up to 8 times; any other error
    is raised at once."""
    import pytest
    from mirrorstack.spark.streaming import start_again_if_worker_late
    late = RuntimeError("java.net.SocketTimeoutException: Timed out while waiting for the Python worker to connect back")
    calls = []

    def starting(failures, error=late):
        def attempt():
            calls.append(1)
            if len(calls) <= failures:
                raise error
            return "query"
        return attempt
    assert start_again_if_worker_late(starting(7), pause=0) == "query" and len(calls) == 8
    calls.clear()
    with pytest.raises(RuntimeError, match="connect back"):
        start_again_if_worker_late(starting(8), pause=0)
    assert len(calls) == 8
    calls.clear()
    with pytest.raises(ValueError):
        start_again_if_worker_late(starting(1, ValueError("bad checkpoint")), pause=0)
    assert len(calls) == 1
