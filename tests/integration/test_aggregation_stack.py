"""`pulumi up --stack aggregation` on the local platform, through the real engine:
us and uk mirrored into central with the identity policy."""
import json
import re
from urllib.parse import quote

import pytest
import requests

from tests.support import connect_rest
from tests.support.kafka_clients import consume, create_topic, produce
from tests.support.leftovers import leftover_processes
from tests.support.pulumi_cli import refreshed
from tests.support.stacks import stack_project

pytestmark = pytest.mark.integration

RECORDS = 10_000
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


def test_aggregation_stack_end_to_end(aggregation):
    project = aggregation
    up = project.run("up", "--yes", "--skip-preview", timeout=900)
    assert "identity policy: us->central, uk->central merge same-named topics into central" in up.stdout
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
    project.run("up", "--yes", "--skip-preview", timeout=600)
    status = connect_rest.read(f"{connect_url}/connectors/{quote(source, safe='')}/status")
    assert status["connector"]["state"] == "RUNNING"

    # the validation re-runs on demand and reconciles every record of both flows
    project.run("up", "--yes", "--skip-preview", "--config", "mirrorstack:validationRunId=after-traffic",
                timeout=900)
    validation = project.outputs()["validation"]
    assert validation["passed"] is True and validation["status"] == "passed", validation
    assert validation["records_checked"] == 2 * RECORDS  # all in the default one-hour window
    for flow in ("us->central", "uk->central"):
        counts = validation["flows"][flow]
        assert counts["topics"] == ["orders"]
        assert (counts["source_records"], counts["matched"], counts["missing"], counts["duplicates"],
                counts["out_of_order"]) == (RECORDS, RECORDS, 0, 0, 0)
        assert counts["failover"] == {}  # no consumer group has committed on us or uk
    # records written straight into central (bypassing MM2) fail the next run, which fails `up`
    produce(out["clusters"]["central"], "orders", 3, prefix="rogue")
    failed = project.run("up", "--yes", "--skip-preview", "--config", "mirrorstack:validationRunId=after-rogue",
                         check=False, timeout=900)
    assert failed.returncode != 0
    assert "replication validation FAILED" in failed.stdout and "extras 3 > tolerance 0" in failed.stdout, \
        failed.stdout[-3000:]
    # report-only: the same finding, reported, and `up` succeeds
    project.run("config", "set", "--path", "mirrorstack:topology.validation.report_only", "true")
    project.run("up", "--yes", "--skip-preview", timeout=900)
    validation = project.outputs()["validation"]
    assert validation["passed"] is False and validation["extras"] == 3
    assert validation["flows"]["us->central"]["matched"] == RECORDS

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
    assert json.loads(project.run("stack", "export").stdout)["deployment"].get("resources") in (None, [])
