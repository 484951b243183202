"""`pulumi up --stack aggregation` on the local platform, through the real engine:
us and uk mirrored into central with the identity policy."""
import json
import re
import shlex
import subprocess
import time
from urllib.parse import quote

import pytest
import requests

from mirrorstack import toolchain
from mirrorstack.mm2.validation_reports import REPORT_TOPIC
from mirrorstack.versions import spark_version
from tests.support import connect_rest
from tests.support.kafka_clients import (consume, create_topic, delete_first_record, end_offsets, produce,
                                         wait_for_count)
from tests.support.leftovers import leftover_processes
from tests.support.pulumi_cli import refreshed
from tests.support.spark_cluster import StandaloneCluster, spark_env, spark_home
from tests.support.stacks import stack_project

pytestmark = pytest.mark.integration

RECORDS = 1_000  # enough to merge two sources into one topic with several batches per partition
HELD = 500  # records produced on uk while its flow is paused, then again while stopped
WRITES = re.compile(r'"(PUT|POST|DELETE) /connectors')


@pytest.fixture
def aggregation(tmp_path):
    with stack_project("aggregation", tmp_path) as project:
        yield project


def _connect_writes(project) -> int:
    logs = sorted(project.local_dir.glob("connect-*/service.log"))
    return sum(len(WRITES.findall(log.read_text(errors="ignore"))) for log in logs)


def _update_steps(preview_json: str) -> list[str]:
    steps = json.loads(preview_json).get("steps", [])
    return [s["urn"] for s in steps if s.get("op") not in ("same", "read", None)]  # a read changes nothing


def _wait_connector_state(connect_url: str, name: str, state: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        status = connect_rest.read(f"{connect_url}/connectors/{quote(name, safe='')}/status")
        if status["connector"]["state"] == state:
            return
        assert time.monotonic() < deadline, f"{name} not {state} after {timeout:.0f}s: {status}"
        time.sleep(0.5)


def test_aggregation_stack_end_to_end(aggregation, tmp_path):
    project = aggregation
    up = project.run("up", "--yes", "--skip-preview", timeout=900)
    assert "identity policy: us->central, uk->central merge same-named topics into central" in up.stdout
    assert "<html" not in (up.stdout + up.stderr).lower()  # progress lines say a starting worker's 404 in one line
    out = project.outputs()
    assert set(out["clusters"]) == {"us", "uk", "central"}
    assert set(out["flows"]) == {"us->central", "uk->central"}
    for states in out["flows"].values():
        assert {s["state"] for s in states.values()} == {"RUNNING"}
        assert len(states) == 3  # source, checkpoint, heartbeat
    # the validation job ran after the flows: no topic yet, nothing checked, said so (not passed),
    # and `up` did not fail (no min_records)
    assert (out["validation"]["status"], out["validation"]["passed"]) == ("nothing-checked", False)
    assert out["validation"]["records_checked"] == 0 and out["validation"]["window"]["seconds"] == 3600
    assert {f: v["source_records"] for f, v in out["validation"]["flows"].items()} == {
        "us->central": 0, "uk->central": 0}

    # 10,000 records into `orders` on each source arrive merged in central's `orders`
    sent = []
    for region in ("us", "uk"):
        create_topic(out["clusters"][region], "orders", partitions=3, replication_factor=1)
        sent += produce(out["clusters"][region], "orders", RECORDS, prefix=region)
    arrived = consume(out["clusters"]["central"], "orders", expected=2 * RECORDS, timeout=300)
    assert len(arrived) == 2 * RECORDS
    assert sorted(r.value for r in arrived) == sorted(r.value for r in sent)

    # a second up changes nothing and writes nothing to Connect
    writes = _connect_writes(project)
    project.run("up", "--yes", "--expect-no-changes", timeout=600)
    assert _connect_writes(project) == writes

    # changing one flow's tasks.max updates exactly that flow's resource
    project.run("config", "set", "--path", "mirrorstack:topology.flows[1].tasks_max", "3")  # default 2
    changed = _update_steps(project.run("preview", "--json").stdout)
    assert len(changed) == 1 and changed[0].endswith("uk->central-connectors"), changed
    project.run("up", "--yes", "--skip-preview", timeout=600)
    source = "uk->central.MirrorSourceConnector"
    connect_url = out["connect"]["central"]
    assert connect_rest.read(f"{connect_url}/connectors/{quote(source, safe='')}/config")["tasks.max"] == "3"

    # a connector deleted by hand: refresh sees it, up repairs it
    requests.delete(f"{connect_url}/connectors/{quote(source, safe='')}", timeout=30).raise_for_status()
    refresh = project.run("refresh", "--yes", "--skip-preview", timeout=600)
    assert refreshed(refresh.stdout) == {"aggregation-uk->central-connectors"}, refresh.stdout
    # ... and a connector paused by hand after the refresh: up sees it live, resumes it and says so
    started = time.monotonic()
    us_source = "us->central.MirrorSourceConnector"
    requests.put(f"{connect_url}/connectors/{quote(us_source, safe='')}/pause", timeout=30).raise_for_status()
    _wait_connector_state(connect_url, us_source, "PAUSED")
    up = project.run("up", "--yes", "--skip-preview", timeout=600)
    assert f"{us_source} on {connect_url} is PAUSED, changed outside the stack; the flow's state is running: " \
           "resuming it" in up.stdout + up.stderr, up.stdout[-3000:]
    for name in (source, us_source):
        status = connect_rest.read(f"{connect_url}/connectors/{quote(name, safe='')}/status")
        assert status["connector"]["state"] == "RUNNING"
    project.run("preview", "--expect-no-changes", timeout=600)
    print(f"\nhand pause repaired by up: {time.monotonic() - started:.0f}s")

    # the uk flow paused, then stopped, through the stack: records produced on uk meanwhile
    # stay there, while the same number produced on us (running) arrive in central
    started = time.monotonic()
    us, uk, central = out["clusters"]["us"], out["clusters"]["uk"], out["clusters"]["central"]
    held, control = [], []
    for state, connect_state in (("paused", "PAUSED"), ("stopped", "STOPPED")):
        project.run("config", "set", "--path", "mirrorstack:topology.flows[1].state", state)
        if state == "paused":  # what a reviewer sees: that flow's connectors, and the state
            preview = project.run("preview", "--diff", timeout=600).stdout
            assert re.search(r'\+ state +: "paused"', preview) and "~ 2 to update" in preview, preview[-3000:]
            # the other: the supervisor learns the flow is held, so it never restarts it
            assert "aggregation-supervisor-central" in preview, preview[-3000:]
        project.run("up", "--yes", "--skip-preview", timeout=600)
        states = project.outputs()["flows"]["uk->central"]
        assert {s["state"] for s in states.values()} == {connect_state}, states
        if state == "stopped":
            assert {s["tasks"] for s in states.values()} == {"0"}, states  # KIP-875: no task left
        held += produce(uk, "orders", HELD, prefix=f"uk-{state}")
        control += produce(us, "orders", HELD, prefix=f"us-{state}")
        arrived = [r.value for r in wait_for_count(central, "orders", 2 * RECORDS + len(control), timeout=120)]
        assert {r.value for r in control} <= set(arrived) and not {r.value for r in held} & set(arrived)
        assert len(arrived) == 2 * RECORDS + len(control)  # and nothing twice
    print(f"uk->central paused then stopped, holding {len(held)} records: {time.monotonic() - started:.0f}s")

    # the validation run while uk's records are held: nothing reached central during its wait,
    # so they are stalled, counted missing, and `up` fails (they were "in flight" and passed)
    started = time.monotonic()
    project.run("config", "set", "--path", "mirrorstack:topology.validation.wait_seconds", "5")
    stalled = project.run("up", "--yes", "--skip-preview", "--config", "mirrorstack:validationRunId=while-held",
                          check=False, timeout=900)
    said = stalled.stdout + stalled.stderr
    assert stalled.returncode != 0 and "replication validation FAILED" in said, said[-3000:]
    assert f"missing {len(held)} (stalled {len(held)}: partitions" in said, said[-3000:]
    assert f"missing {len(held)} > tolerance 0" in said, said[-3000:]
    project.run("config", "set", "--path", "mirrorstack:topology.validation.wait_seconds", "60")
    print(f"validation with the held records stalled: {time.monotonic() - started:.0f}s")

    # running again, and the validation re-run on demand: the held records arrive, and every
    # record of both flows is reconciled (0 missing, 0 duplicates across the pause and the stop).
    # Records written straight into central (bypassing MM2) meanwhile are found by the same run;
    # report-only: reported, and `up` succeeds. (That such a finding fails `up` otherwise, the
    # stalled run above shows for missing records; extras over tolerance: test_validation_job and
    # the resource's units.)
    started = time.monotonic()
    rogue = produce(out["clusters"]["central"], "orders", 3, prefix="rogue")
    # and a copy lost on central: its source record is missing in every run below (lost where a rogue
    # record went, so the partition holds what its sources put there, and no run waits for it)
    lost = delete_first_record(out["clusters"]["central"], "orders", rogue[0].partition)
    lost_from = next(f"{region}->central" for region in ("us", "uk") if lost.value.startswith(region.encode()))
    project.run("config", "set", "--path", "mirrorstack:topology.validation.report_only", "true")
    project.run("config", "set", "--path", "mirrorstack:topology.flows[1].state", "running")
    project.run("up", "--yes", "--skip-preview", "--config", "mirrorstack:validationRunId=after-traffic",
                timeout=900)
    print(f"uk->central resumed and validated: {time.monotonic() - started:.0f}s")
    out_after = project.outputs()
    assert {s["state"] for s in out_after["flows"]["uk->central"].values()} == {"RUNNING"}
    validation = out_after["validation"]
    assert (validation["passed"], validation["status"], validation["extras"]) == (False, "failed", 3), validation
    assert sorted(f.split(": ", 1)[1] for f in validation["failures"]) == [
        "extras 3 > tolerance 0", "missing 1 > tolerance 0"], validation["failures"]  # nothing else
    assert validation["records_checked"] == 2 * (RECORDS + 2 * HELD)  # all in the default one-hour window
    for flow in ("us->central", "uk->central"):
        counts, lost_here = validation["flows"][flow], int(flow == lost_from)
        assert counts["topics"] == ["orders"]
        assert (counts["source_records"], counts["matched"], counts["missing"], counts["duplicates"],
                counts["out_of_order"]) == (RECORDS + 2 * HELD, RECORDS + 2 * HELD - lost_here, lost_here, 0, 0), \
            (flow, counts)
        assert counts["failover"] == {}  # no consumer group has committed on us or uk

    # the same validation on a real Spark standalone cluster (a master and a worker): the same report.
    # (The job on two workers, and through a Spark Connect server, by the same command line `up` runs:
    # test_validation_job.)
    started = time.monotonic()
    cluster = StandaloneCluster(tmp_path / "spark-cluster", workers=1, cores=1, memory="1g")
    try:
        cluster.start()
        for key, value in (("master", cluster.master_url), ("executor_memory", "512m"), ("executor_cores", "1")):
            project.run("config", "set", "--path", f"mirrorstack:topology.validation.{key}", value)
        up = project.run("up", "--yes", "--skip-preview", "--config", "mirrorstack:validationRunId=on-a-cluster",
                         timeout=900)
        assert f"validating 2 flow(s) with Spark ({cluster.master_url})" in up.stdout, up.stdout[-3000:]
        on_cluster = project.outputs()["validation"]
        keys = ("passed", "status", "extras", "records_checked", "failures", "flows")
        assert {k: on_cluster[k] for k in keys} == {k: validation[k] for k in keys}
        apps = cluster.applications()
        assert [app["state"] for app in apps] == ["FINISHED"], apps  # the job's, ended with it
        assert (tmp_path / "spark-cluster" / "worker-0" / apps[0]["id"]).is_dir()  # its executor ran there
        # `up` took each report from the topic the job wrote it to on central (the first flow's target)
        central = out["clusters"]["central"]
        sent = consume(central, REPORT_TOPIC, expected=end_offsets(central, REPORT_TOPIC), timeout=60)
        assert len(sent) >= 3 and len({r.key for r in sent}) == len(sent)  # one record per run, each its own key
        last = json.loads(sent[-1].value)
        assert (last["passed"], last["failures"], last["records_checked"]) == (
            on_cluster["passed"], on_cluster["failures"], on_cluster["records_checked"])
        print(f"validated on a standalone cluster: {time.monotonic() - started:.0f}s")
    finally:
        cluster.stop()
    for key in ("executor_memory", "executor_cores"):
        project.run("config", "rm", "--path", f"mirrorstack:topology.validation.{key}")

    # handed out instead of run (a Spark mirrorstack does not run): `up` gives the files and the exact
    # spark-submit line and waits for nothing; the job, submitted as a user would (here with the jars
    # on --jars: no Maven Central), sends its report to its topic; the next `up` takes it: the same report
    started = time.monotonic()
    project.run("config", "rm", "--path", "mirrorstack:topology.validation.master")
    project.run("config", "set", "--path", "mirrorstack:topology.validation.submit", "yourself")
    up = project.run("up", "--yes", "--skip-preview", "--config", "mirrorstack:validationRunId=handed-out",
                     timeout=600)
    handed = project.outputs()["validation"]
    submit = handed["submit"]
    assert (handed["status"], handed["passed"]) == ("awaiting-report", False), handed
    assert submit["command"] in up.stderr + up.stdout and submit["report_cluster"] == out["clusters"]["central"]
    argv = shlex.split(submit["command"])
    assert argv[:3] == ["spark-submit", "--packages", f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark_version()}"]
    argv[:3] = [str(spark_home() / "bin" / "spark-submit"), "--jars",
                ",".join(str(j) for j in toolchain.spark_kafka_jars())]
    submitted = subprocess.run(argv, cwd=submit["directory"], env=spark_env(), capture_output=True, text=True,
                               timeout=600)
    assert submitted.returncode == 1 and "replication check FAILED" in submitted.stdout, submitted.stderr[-3000:]
    project.run("up", "--yes", "--skip-preview", timeout=600)
    taken = project.outputs()["validation"]
    assert {k: taken[k] for k in keys} == {k: validation[k] for k in keys} and taken["submit"] == submit
    project.run("preview", "--expect-no-changes", timeout=300)  # taken once: nothing more to do
    print(f"handed out, submitted, taken: {time.monotonic() - started:.0f}s")

    # destroying the flows deletes their connectors (Connect still runs to tell)
    urns = [r["urn"] for r in json.loads(project.run("stack", "export").stdout)["deployment"]["resources"]
            if r["type"] == "mirrorstack:mirror:MirrorMaker2"]
    assert len(urns) == 2
    project.run("destroy", "--yes", "--skip-preview", *[f"--target={u}" for u in urns],
                "--target-dependents", timeout=600)
    assert connect_rest.read(f"{connect_url}/connectors") == []

    # destroy: no process left, empty stack
    project.run("destroy", "--yes", "--skip-preview", timeout=600)
    assert leftover_processes(str(project.local_dir)) == []
    left = sorted(p.name for p in project.local_dir.iterdir()) if project.local_dir.exists() else []
    assert left == [], left  # every service's folder and the validation job's went with them
    assert json.loads(project.run("stack", "export").stdout)["deployment"].get("resources") in (None, [])
