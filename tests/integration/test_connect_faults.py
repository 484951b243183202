"""Kafka Connect faults under `pulumi up`, through the real engine on the
active-passive stack (primary → standby, default policy: `t` arrives as
`primary.t`; one Connect worker next to standby):

- every Connect worker hung (SIGSTOP: TCP connects, nothing answers) fails
  `up` within a bound, naming the Connect URL; once they resume, `up` converges
  with no duplicate or leftover connector;
- a source task FAILED out of band (its config untouched) is seen by
  `pulumi refresh` and restarted by the next `up`.
"""
import json
import os
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from confluent_kafka import Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from components.platforms.local.launcher import ProcessHandle, is_alive
from tests.support import connect_rest
from tests.support.kafka_clients import admin, consume, create_topic, produce
from tests.support.pulumi_cli import refreshed
from tests.support.stacks import stack_project

pytestmark = pytest.mark.integration

STACK = "active-passive"
FLOW = "primary->standby"
SOURCE = f"{FLOW}.MirrorSourceConnector"
CONNECTORS = sorted(f"{FLOW}.{kind}" for kind in
                    ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector"))
FAILING_UP_BOUND = 240  # seconds: Connect requests give up after about 90 s


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """The stack after a first good `up`: (project, outputs)."""
    with stack_project(STACK, tmp_path_factory.mktemp("connect-faults")) as project:
        project.run("up", "--yes", "--skip-preview", timeout=900)
        yield project, project.outputs()


def _resources(project) -> list[dict]:
    return json.loads(project.run("stack", "export", "--show-secrets").stdout)["deployment"].get("resources") or []


def _connect_workers(project) -> list[ProcessHandle]:
    """The stack's Connect worker processes, from its state: each one checked to
    be alive (pid and start time) and to run from this stack's folder."""
    handles = []
    for res in _resources(project):
        outs = res.get("outputs") or {}
        if not str(outs.get("name", "")).startswith("connect-") or not outs.get("pid"):
            continue
        handle = ProcessHandle(outs["name"], int(outs["pid"]), int(outs["start_time"]), outs["log_file"])
        cmdline = Path(f"/proc/{handle.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        assert is_alive(handle) and str(project.local_dir) in cmdline, (handle, cmdline[:300])
        handles.append(handle)
    assert handles, "no connect-* LocalService in the stack's state"
    return handles


@contextmanager
def _stopped(handles: list[ProcessHandle]):
    """SIGSTOP the processes; SIGCONT them whatever happens."""
    stopped = []
    try:
        for handle in handles:
            os.kill(handle.pid, signal.SIGSTOP)
            stopped.append(handle)
        yield
    finally:
        for handle in stopped:
            if is_alive(handle):  # still ours (pid + start time)
                os.kill(handle.pid, signal.SIGCONT)


def _mm2_outputs(project) -> dict:
    (res,) = [r for r in _resources(project) if r["urn"].endswith(f"{FLOW}-connectors")]
    return res["outputs"]


def _flow_connectors(listed: list[str]) -> list[str]:
    """The forward flow's connectors (the stack's reverse flow, stopped while
    primary is active, has its own on the same workers)."""
    return sorted(n for n in listed if n.startswith(f"{FLOW}."))


def _status(connect_url: str, name: str) -> dict:
    reply = requests.get(f"{connect_url}/connectors/{quote(name, safe='')}/status", timeout=10)
    reply.raise_for_status()
    return reply.json()


def test_hung_connect_fails_up_in_bounded_time_then_up_converges(deployed):
    project, out = deployed
    connect_url = out["connect"]["standby"]
    assert _flow_connectors(connect_rest.read(f"{connect_url}/connectors")) == CONNECTORS
    workers = _connect_workers(project)

    project.run("config", "set", "--path", "mirrorstack:topology.flows[0].tasks_max", "3")
    with _stopped(workers):
        with pytest.raises(requests.Timeout):  # the workers really are hung
            requests.get(f"{connect_url}/connectors", timeout=3)
        started = time.monotonic()
        failed = project.run("up", "--yes", "--skip-preview", check=False, timeout=600)
        took = time.monotonic() - started
    print(f"\nfailing `pulumi up` with hung Connect took {took:.0f}s")
    text = failed.stdout + failed.stderr
    assert failed.returncode != 0, text[-3000:]
    assert took < FAILING_UP_BOUND, text[-3000:]
    assert f"Kafka Connect at {connect_url} did not answer" in text, text[-3000:]
    assert "attempts" in text and "pulumi refresh" in text, text[-3000:]

    # resumed: up converges, each connector exists once, the change is live
    started = time.monotonic()
    project.run("up", "--yes", "--skip-preview", timeout=900)
    print(f"`pulumi up` after SIGCONT took {time.monotonic() - started:.0f}s")
    listed = requests.get(f"{connect_url}/connectors", timeout=10).json()
    assert _flow_connectors(listed) == CONNECTORS and len(listed) == len(set(listed)), listed
    config = requests.get(f"{connect_url}/connectors/{quote(SOURCE, safe='')}/config", timeout=10).json()
    assert config["tasks.max"] == "3"
    for name in CONNECTORS:
        assert _status(connect_url, name)["connector"]["state"] == "RUNNING"
    project.run("up", "--yes", "--expect-no-changes", timeout=600)


def _set_max_message_bytes(bootstrap: str, topic: str, value: str | None) -> None:
    """Set (or with None, remove) a topic's max.message.bytes override."""
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("max.message.bytes", value or "", incremental_operation=op)])
    client = admin(bootstrap)
    for future in client.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def _wait_task_state(connect_url: str, name: str, state: str, timeout: float = 180) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status = _status(connect_url, name)
        if status["tasks"] and all(t["state"] == state for t in status["tasks"]):
            return status
        assert time.monotonic() < deadline, f"{name} tasks not {state} after {timeout:.0f}s: {status}"
        time.sleep(1)


def test_task_failed_out_of_band_is_refreshed_then_restarted_by_up(deployed):
    project, out = deployed
    primary, standby, connect_url = out["clusters"]["primary"], out["clusters"]["standby"], out["connect"]["standby"]
    topic, remote = "faults", "primary.faults"  # topics [".*"], default policy
    brokers = len(admin(primary).list_topics(timeout=10).brokers)
    create_topic(primary, topic, partitions=1, replication_factor=min(3, brokers))
    produce(primary, topic, 1, prefix="small")
    assert len(consume(standby, remote, expected=1, timeout=120)) >= 1  # replicated: the task runs
    _wait_task_state(connect_url, SOURCE, "RUNNING")

    # the remote topic refuses a 200 KB record: the source task's producer fails it
    _set_max_message_bytes(standby, remote, "10000")
    big = os.urandom(200_000)
    producer = Producer({"bootstrap.servers": primary, "acks": "all"})
    producer.produce(topic, key=b"big", value=big)
    assert producer.flush(30) == 0
    failed = _wait_task_state(connect_url, SOURCE, "FAILED")
    assert "RecordTooLargeException" in failed["tasks"][0].get("trace", ""), failed
    assert failed["connector"]["state"] == "RUNNING"  # only the task failed; its config is untouched

    # cause fixed; refresh sees the failed task in the resource's `states`
    _set_max_message_bytes(standby, remote, None)
    refresh = project.run("refresh", "--yes", "--skip-preview", timeout=600)
    state = _mm2_outputs(project)["states"][SOURCE]
    assert state["state"] == "RUNNING" and int(state["running_tasks"]) < int(state["tasks"]), state
    assert refreshed(refresh.stdout) == {f"{STACK}-{FLOW}-connectors"}, refresh.stdout

    # up restarts the failed task: it runs again and the big record arrives
    started = time.monotonic()
    up = project.run("up", "--yes", "--skip-preview", check=False, timeout=900)
    if up.returncode != 0:  # say what the task does a moment later, next to why `up` gave up
        time.sleep(5)
        tasks = [(t["id"], t["state"]) for t in _status(connect_url, SOURCE)["tasks"]]
        pytest.fail(f"`pulumi up` failed; 5 s later the source tasks are {tasks}\n{up.stdout[-5000:]}")
    assert f"{FLOW}-connectors" in up.stdout and "updated" in up.stdout, up.stdout
    print(f"\n`pulumi up` restarting the failed task took {time.monotonic() - started:.0f}s")
    status = _wait_task_state(connect_url, SOURCE, "RUNNING", timeout=60)
    assert status["connector"]["state"] == "RUNNING", (status, up.stdout)
    state = _mm2_outputs(project)["states"][SOURCE]
    assert state["running_tasks"] == state["tasks"] != "0", state
    deadline, arrived = time.monotonic() + 120, []
    while not any(r.key == b"big" for r in arrived) and time.monotonic() < deadline:
        arrived = consume(standby, remote, expected=10, timeout=5)  # small (maybe replayed), then big
    assert [r.value for r in arrived if r.key == b"big"] == [big], [(r.key, len(r.value or b"")) for r in arrived]
