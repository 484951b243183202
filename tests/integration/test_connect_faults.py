"""Kafka Connect faults under `pulumi up`, through the real engine on the
active-passive stack (primary → standby, default policy: `t` arrives as
`primary.t`; one Connect worker next to standby; its monitoring on):

- first, monitoring against real records: JMX exporters on every JVM,
  Prometheus with the generated config and alert rules, every expression of
  the generated dashboards returning a series; a task broken out of band fires
  MirrorTaskFailed (then mended);

- every Connect worker hung (SIGSTOP: TCP connects, nothing answers) fails
  `up` within a bound, naming the Connect URL; once they resume, `up` converges
  with no duplicate or leftover connector;
- a source task FAILED out of band (its config untouched) is named, with the
  first line of its trace, by `pulumi refresh` and preview; an `up` while its
  cause is still there restarts it, sees it fail again and fails naming it;
  once the cause is fixed `up` (reconfiguring the flow too) restarts it and it
  stays running;
- a 1.5 MB record the source took gzip-compressed at default limits arrives,
  and the records after it too;
- the self-healing supervisor killed is started again by its keeper, with no
  `up`; while Connect is down it says so once, and once when it reads again;
- `pulumi refresh` with Connect's Kafka broker killed, then its worker and the
  supervisor's keeper too, succeeds within seconds, records the connectors
  UNREACHABLE and says what is down and the fix, one line each; `up` brings
  them back;
- a separator change on the live flow is marked as a rename in the plan and
  copies every record again under the new names; one whose names Kafka would
  refuse ('.' swapped for '_') is refused before anything changes.
"""
import json
import os
import re
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from confluent_kafka import Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from mirrorstack.connect.api import REQUEST_BUDGET_ENV, RESTART_WATCH_ENV
from mirrorstack.model.spec import load_topology
from mirrorstack.connect.healing import CAP_REACHED, CHECK_ERRORS, HELD, RESTARTS_TOTAL
from mirrorstack.monitoring.alerts import RESTART_CAP_ALERT, alert_rules
from mirrorstack.monitoring.dashboards import concrete_query, dashboard_queries
from mirrorstack.platforms.local import keeper
from mirrorstack.platforms.local.launcher import ProcessHandle, is_alive
from tests.support import connect_rest
from tests.support.kafka_clients import (admin, consume, consume_group, create_topic, produce, topic_names,
                                         wait_for_count)
from tests.support.pulumi_cli import refreshed
from tests.support.stacks import self_healing, stack_project
from tests.support.supervisor_metrics import supervisor_samples
from tests.support.waiting import prometheus_query as query
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

STACK = "active-passive"
FLOW = "primary->standby"
SOURCE = f"{FLOW}.MirrorSourceConnector"
CONNECTORS = sorted(f"{FLOW}.{kind}" for kind in
                    ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector"))
# The hung-Connect `up` runs with a 20 s request budget (the operator's knob; 90 s by default, whose
# bound the unit tests keep): it must fail well within this, where waiting out 90 s proves nothing more.
HUNG_REQUEST_SECONDS = 20
FAILING_UP_BOUND = 120  # seconds


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """The stack after a first good `up`: (project, outputs)."""
    # Self-healing in seconds with a cap of 2 restarts: restarts at once and 20 s later, then a
    # give-up, so the cap and its alert are seen live and the faults below stay FAILED for `up`.
    # (The unit is 10 s, not 1: running for one back-off starts the count over, and a record too
    # large fails its task again 6-15 s after a restart; a shorter back-off would never give up.)
    with stack_project(STACK, tmp_path_factory.mktemp("connect-faults"),
                       change=self_healing(backoff_seconds=10, max_restarts=2)) as project:
        # the stack file's monitoring, quick: scraped every 2 s, a failed task alerting after 10 s
        for key, value in (("scrape_interval", "2s"), ("failed_for", "10s")):
            project.run("config", "set", "--path", f"mirrorstack:topology.monitoring.{key}", value)
        project.run("up", "--yes", "--skip-preview", timeout=900)
        yield project, project.outputs()


def test_monitoring_sees_real_replication_and_fires_the_failed_task_alert(deployed):
    """First on the module's stack (its only replicated topic is still `primary.orders`): JMX
    exporters on every JVM, Prometheus with the generated config and alert rules, the generated
    dashboards, against real records; then a broken task fires its alert, and is mended."""
    project, out = deployed
    prometheus, primary, standby = out["prometheus_url"], out["clusters"]["primary"], out["clusters"]["standby"]
    assert out["alert_rules"] == ["ConnectSupervisorDown", "ConnectWorkerDown", "MirrorConnectorFailed",
                                  "MirrorConnectorRestartCapReached", "MirrorReplicationLatencyHigh",
                                  "MirrorReplicationStalled", "MirrorTaskFailed"]
    assert "grafana_url" not in out  # local: dashboards as files only
    dashboards = sorted(project.local_dir.glob("grafana/dashboards/*.json"))
    assert [d.name for d in dashboards] == ["mirrorstack-flow.json", "mirrorstack-overview.json"]

    # real records through the flow, and a consumer group for the checkpoint series
    create_topic(primary, "orders", 2, 1)
    produce(primary, "orders", 1000)
    assert len(wait_for_count(standby, "primary.orders", 1000)) == 1000
    consume_group(primary, "orders", "app-billing", 300)
    produce(primary, "orders", 200)  # after the group committed: rates and latencies are fresh

    # every exporter is a target, and up: 2 clusters x (controller + broker) + 1 Connect worker,
    # and the Connect group's self-healing supervisor
    ups = wait_until("6 targets up", lambda: (lambda r: r if len(r) == 6 and all(x["value"][1] == "1" for x in r)
                                              else None)(query(prometheus, "up")))
    assert sorted((u["metric"]["cluster"], u["metric"]["role"]) for u in ups) == [
        ("primary", "broker"), ("primary", "controller"), ("standby", "broker"), ("standby", "connect"),
        ("standby", "controller"), ("standby", "supervisor")]
    # the reverse flow, stopped by the topology while primary is active, is held: never restarted
    held = {s["metric"]["connector"] for s in query(prometheus, f"{HELD} == 1")}
    assert held == {f"standby->primary.{kind}" for kind in
                    ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector")}, held

    # EVERY expression of the dashboards and every alert's measured base returns a series
    topology = _topology(project)
    exprs = {concrete_query(q) for d in dashboards for q in dashboard_queries(json.loads(d.read_text()))}
    # (the reverse flow is stopped while primary is active: it replicates nothing to measure)
    exprs |= {r.base for r in alert_rules([f for f in topology.flows if topology.flow_state(f) == "running"])}
    empty = set(exprs)
    deadline = time.monotonic() + 150
    while empty and time.monotonic() < deadline:
        empty = {e for e in empty if not query(prometheus, e)}
        time.sleep(3)
    assert not empty, f"{len(empty)} of {len(exprs)} expressions return no series:\n" + "\n".join(sorted(empty))

    # the latency and record-rate series name the flow's source, target and topic
    for name in ("kafka_connect_mirror_source_connector_replication_latency_ms_max",
                 "kafka_connect_mirror_source_connector_record_rate"):
        labels = [s["metric"] for s in query(prometheus, name)]
        assert labels and all((m["source"], m["target"], m["topic"], m["flow"]) ==
                              ("primary", "standby", "primary.orders", FLOW) for m in labels), labels

    # break the source tasks' config out of band: MirrorTaskFailed fires within its `for`
    connect = out["connect"]["standby"]
    url = f"{connect}/connectors/{quote(SOURCE, safe='')}"
    config = requests.get(f"{url}/config", timeout=10).json()
    requests.put(f"{url}/config", json={**config, "source.consumer.max.poll.records": "0"},
                 timeout=30).raise_for_status()
    broke = time.monotonic()

    def firing():
        alerts = requests.get(f"{prometheus}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
        return [a for a in alerts if a["labels"]["alertname"] == "MirrorTaskFailed" and a["state"] == "firing"]
    (alert,) = wait_until("MirrorTaskFailed firing", firing, timeout=90)
    assert alert["labels"]["connector"] == SOURCE and alert["labels"]["severity"] == "critical"
    assert float(alert["value"]) >= 1
    print(f"MirrorTaskFailed fired {time.monotonic() - broke:.0f}s after the config broke")
    # The supervisor restarted the failed task on its schedule, twice (the cap here), each time
    # in vain, then gave up: its alert fires, naming the connector, until the task runs again.
    def gave_up():
        alerts = requests.get(f"{prometheus}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
        return [a for a in alerts if a["labels"]["alertname"] == RESTART_CAP_ALERT and a["state"] == "firing"]
    (capped,) = wait_until(f"{RESTART_CAP_ALERT} firing", gave_up, timeout=60)
    assert (capped["labels"]["connector"], capped["labels"]["connect"]) == (SOURCE, "standby"), capped
    (restarts,) = query(prometheus, f'{RESTARTS_TOTAL}{{connector="{SOURCE}"}}')
    assert restarts["value"][1] == "2", restarts
    log = (project.local_dir / "supervisor-standby" / "service.log").read_text()
    assert log.count(f"restarted the failed parts of {SOURCE} ") == 2 and f"gave up on {SOURCE}: still FAILED " \
        "after 2 restarts in a row (the cap)" in log, log[-3000:]
    print(f"{RESTART_CAP_ALERT} fired {time.monotonic() - broke:.0f}s after the config broke")
    # mended as it was (the stack's own config), and its topics gone: the module's other tests start
    # from a running flow with no partition to copy (the one they create is each task's only one)
    requests.put(f"{url}/config", json=config, timeout=30).raise_for_status()
    wait_until("the supervisor no longer giving up", lambda: query(
        prometheus, f'{CAP_REACHED}{{connector="{SOURCE}"}} == 0'), timeout=60)
    for bootstrap, topic in ((primary, "orders"), (standby, "primary.orders")):
        client = admin(bootstrap)  # kept: the future fails if its client is collected first
        client.delete_topics([topic])[topic].result(timeout=30)
    wait_until("the source connector without tasks", lambda: _status(connect, SOURCE)["tasks"] == [], timeout=120)
    # and MM2's consumer, still assigned the topic until that refresh, did not create it again
    assert "orders" not in topic_names(primary)


def _topology(project):
    """The stack's topology as `pulumi config` holds it (with the test's overrides)."""
    raw = json.loads(project.run("config", "--json").stdout)["mirrorstack:topology"]
    return load_topology(raw.get("objectValue") or json.loads(raw["value"]))


def _resources(project) -> list[dict]:
    return json.loads(project.run("stack", "export", "--show-secrets").stdout)["deployment"].get("resources") or []


def _service(project, name: str) -> dict:
    """A LocalService's recorded outputs (pid, start time, running)."""
    (outs,) = [o for o in (r.get("outputs") or {} for r in _resources(project)) if o.get("name") == name
               and "pid" in o]
    return outs


def _killed(outs: dict) -> None:
    """SIGKILL a service of the stack (checked to be ours by pid and start time), and wait till it is gone."""
    handle = ProcessHandle(outs["name"], int(outs["pid"]), int(outs["start_time"]), outs["log_file"])
    assert is_alive(handle), handle
    os.kill(handle.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while is_alive(handle):
        assert time.monotonic() < deadline, f"{handle} still alive 30 s after SIGKILL"
        time.sleep(0.2)


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


SUPERVISOR = "supervisor-standby"
CANNOT_READ, READS_AGAIN = "cannot read the connectors' status", "reads the connectors' status again"


def _supervisor_log(project) -> str:
    return (project.local_dir / SUPERVISOR / "service.log").read_text()


def _outages_said(log: str) -> list[str]:
    """The supervisor's lines about reading Connect, in order: each outage is said once as it begins and once
    as it ends, never once a check (they alternate)."""
    said = [CANNOT_READ if CANNOT_READ in line else READS_AGAIN for line in log.splitlines()
            if CANNOT_READ in line or READS_AGAIN in line]
    assert all(a != b for a, b in zip(said, said[1:])) and said[:1] != [READS_AGAIN], log[-3000:]
    return said


def _supervised_process(project) -> ProcessHandle | None:
    """The supervisor's own process, the one its keeper runs now (None between two starts)."""
    return keeper.current(project.local_dir / SUPERVISOR / keeper.STATUS_FILE)


def _check_errors(out) -> int:
    """The supervisor's count of checks that could not read Connect (its /metrics)."""
    return int(supervisor_samples(requests.get(out["supervisors"]["standby"], timeout=10).text)[(CHECK_ERRORS, None)])


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
    logged = len(_supervisor_log(project))

    project.run("config", "set", "--path", "mirrorstack:topology.flows[0].tasks_max", "3")
    with _stopped(workers):
        with pytest.raises(requests.Timeout):  # the workers really are hung
            requests.get(f"{connect_url}/connectors", timeout=3)
        started = time.monotonic()
        failed = project.run("up", "--yes", "--skip-preview", check=False, timeout=600,
                             env={REQUEST_BUDGET_ENV: str(HUNG_REQUEST_SECONDS)})
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
    # The supervisor's checks timed out while the workers hung: it said so once, and once when it read again
    # (not a line per check).
    said = wait_until("the supervisor reading Connect again", lambda: (lambda log: log if READS_AGAIN in log else None)(
        _supervisor_log(project)[logged:]), timeout=60, every=1)
    assert _outages_said(said)[-1] == READS_AGAIN


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
    # the supervisor restarts it twice in vain, then gives up: from then on it stays FAILED
    wait_until("the supervisor giving up", lambda: supervisor_samples(
        requests.get(out["supervisors"]["standby"], timeout=10).text)[(CAP_REACHED, SOURCE)] == 1, timeout=90, every=1)
    failed = _wait_task_state(connect_url, SOURCE, "FAILED")
    assert "RecordTooLargeException" in failed["tasks"][0].get("trace", ""), failed
    assert failed["connector"]["state"] == "RUNNING"  # only the task failed; its config is untouched

    # refresh records the failed task in the resource's `states` and says which and why;
    # so does a preview
    cause = "org.apache.kafka.common.errors.RecordTooLargeException"
    refresh = project.run("refresh", "--yes", "--skip-preview", timeout=600)
    state = _mm2_outputs(project)["states"][SOURCE]
    assert state["state"] == "RUNNING" and int(state["running_tasks"]) < int(state["tasks"]), state
    assert state["failed"].startswith("task 0 FAILED on ") and cause in state["failed"], state
    assert refreshed(refresh.stdout) == {f"{STACK}-{FLOW}-connectors"}, refresh.stdout
    said = refresh.stdout + refresh.stderr
    assert f"{SOURCE}: task 0 FAILED on " in said and cause in said, said[-3000:]
    preview = project.run("preview", "--diff", timeout=600)
    said = preview.stdout + preview.stderr
    assert f"{SOURCE}: task 0 FAILED on " in said and cause in said, said[-3000:]

    # up with the cause still there: it restarts the task, which fails again (a crash
    # loop), and up fails naming the flow, the task and the first line of its trace
    started = time.monotonic()
    looping = project.run("up", "--yes", "--skip-preview", check=False, timeout=900)
    said = looping.stdout + looping.stderr
    assert looping.returncode != 0, said[-3000:]
    again = re.search(rf"flow {re.escape(FLOW)}: {re.escape(SOURCE)} task 0 FAILED again (\d+)s after `up` "
                      rf"restarted it[^\n]*{re.escape(cause)}", said)
    assert again, said[-3000:]
    # and the plan had said why: the remote topic takes smaller batches than its source topic
    assert f"{remote}: takes batches up to 10000 bytes on standby, {topic} up to " in said, said[-3000:]
    print(f"\nthe restarted task failed again after {again.group(1)} s; the failing `pulumi up` took "
          f"{time.monotonic() - started:.0f}s")
    assert _wait_task_state(connect_url, SOURCE, "FAILED", timeout=30)

    # cause fixed
    _set_max_message_bytes(standby, remote, None)

    # up, reconfiguring the flow too (its compression), restarts the failed task: it runs
    # again and the big record arrives. (Before, a reconfigured connector's FAILED task
    # was not restarted, and up failed at once on its old FAILED status.)
    project.run("config", "set", "--path", "mirrorstack:topology.flows[0].throughput.compression", "lz4")
    started = time.monotonic()
    # the operator's watch of the restarted task: 10 s, where the crash loop above needed the default 30
    up = project.run("up", "--yes", "--skip-preview", check=False, timeout=900, env={RESTART_WATCH_ENV: "10"})
    if up.returncode != 0:  # say what the task does a moment later, next to why `up` gave up
        time.sleep(5)
        tasks = [(t["id"], t["state"]) for t in _status(connect_url, SOURCE)["tasks"]]
        pytest.fail(f"`pulumi up` failed; 5 s later the source tasks are {tasks}\n{up.stdout[-5000:]}")
    assert f"{FLOW}-connectors" in up.stdout and "updated" in up.stdout, up.stdout
    config = connect_rest.read(f"{connect_url}/connectors/{quote(SOURCE, safe='')}/config")
    assert config["producer.override.compression.type"] == "lz4", config
    print(f"\n`pulumi up` restarting the failed task took {time.monotonic() - started:.0f}s")
    status = _wait_task_state(connect_url, SOURCE, "RUNNING", timeout=60)
    assert status["connector"]["state"] == "RUNNING", (status, up.stdout)
    state = _mm2_outputs(project)["states"][SOURCE]
    assert state["running_tasks"] == state["tasks"] != "0", state
    deadline, arrived = time.monotonic() + 120, []
    while not any(r.key == b"big" for r in arrived) and time.monotonic() < deadline:
        arrived = consume(standby, remote, expected=10, timeout=5)  # small (maybe replayed), then big
    assert [r.value for r in arrived if r.key == b"big"] == [big], [(r.key, len(r.value or b"")) for r in arrived]


REFRESH_BOUND = 60  # seconds: before, a refresh gave up after 91 s (broker down) or failed in 15 s (worker down)


def _flow_resources(project) -> list[dict]:
    """The outputs of each flow's MirrorMaker2Connectors resource."""
    return [o for o in (r.get("outputs") or {} for r in _resources(project)) if "states" in o and "flow" in o]


def _timed_refresh(project) -> tuple[str, float]:
    started = time.monotonic()
    refresh = project.run("refresh", "--yes", "--skip-preview", check=False, timeout=600)
    took, said = time.monotonic() - started, refresh.stdout + refresh.stderr
    assert refresh.returncode == 0, said[-3000:]
    return said, took


def test_a_large_record_the_source_took_compressed_arrives_and_the_flow_goes_on(deployed):
    """A 1.5 MB record, written gzip-compressed at the source's default limits: Kafka's own
    task producer refused it (max.request.size 1 MiB, uncompressed) and died with all its
    partitions; the flow's producer now takes it and sends it compressed (zstd), so the
    remote topic's default limit holds it."""
    _, out = deployed
    primary, standby = out["clusters"]["primary"], out["clusters"]["standby"]
    topic, remote = "large", "primary.large"
    create_topic(primary, topic, partitions=1, replication_factor=1)
    # compressible like a real payload (JSON, text), not random bytes that no compression shrinks
    large = b"".join(b'{"line": %d, "text": "%s"}\n' % (i, os.urandom(8).hex().encode()) for i in range(36_000))
    assert 1_400_000 < len(large) < 2_000_000
    producer = Producer({"bootstrap.servers": primary, "acks": "all", "compression.type": "gzip",
                         "message.max.bytes": 4_000_000})  # librdkafka's own check is on the whole record
    producer.produce(topic, key=b"large", value=large)
    assert producer.flush(30) == 0
    after = produce(primary, topic, 5, prefix="after-large")  # a dead task would hold these back too
    arrived = consume(standby, remote, expected=6, timeout=180)
    assert [r.value for r in arrived] == [large, *(r.value for r in after)], [len(r.value) for r in arrived]
    assert _status(out["connect"]["standby"], SOURCE)["tasks"][0]["state"] == "RUNNING"


def test_a_killed_supervisor_is_started_again_with_no_up(deployed):
    """The supervisor acts when `up` does not, so nothing but a person's `up` restarted it on local: its keeper
    now does, as the containers' restart policy does on docker."""
    project, out = deployed
    supervisor = _supervised_process(project)
    cmdline = Path(f"/proc/{supervisor.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    assert "-m mirrorstack.connect.supervisor " in cmdline and str(project.local_dir) in cmdline, cmdline
    killed = time.monotonic()
    os.kill(supervisor.pid, signal.SIGKILL)

    def serving_again():
        now = _supervised_process(project)
        try:
            return now is not None and now.pid != supervisor.pid and is_alive(now) and _check_errors(out) >= 0
        except requests.ConnectionError:
            return False
    wait_until("the supervisor started again and serving its metrics, with no `up`", serving_again, timeout=60,
               every=0.5)
    print(f"\nthe killed supervisor served again {time.monotonic() - killed:.1f}s later")
    assert "was killed by SIGKILL" in _supervisor_log(project)
    assert _service(project, SUPERVISOR)["running"] is True  # the stack's record: still the same keeper


def test_refresh_during_an_outage_answers_within_seconds_and_says_what_is_down(deployed):
    """Late in the module: it kills the Kafka cluster Connect keeps its configs in,
    then the Connect worker, then the supervisor's keeper; `up` brings them back."""
    project, out = deployed
    primary, standby, connect_url = out["clusters"]["primary"], out["clusters"]["standby"], out["connect"]["standby"]
    flows = _flow_resources(project)
    assert len(flows) == 2  # the forward flow and the stopped reverse one, both on standby's Connect

    logged = len(_supervisor_log(project))

    # 1. standby's broker is gone: Connect answers, but cannot read its connectors' configs
    _killed(_service(project, "standby-broker-0"))
    said, took = _timed_refresh(project)
    print(f"\n`pulumi refresh` with Connect's Kafka broker killed took {took:.0f}s")
    assert took < REFRESH_BOUND, said[-3000:]
    assert f"Kafka Connect at {connect_url} answers but could not read its connectors" in said, said[-3000:]
    assert "fix: bring that Kafka cluster back" in said, said[-3000:]
    assert "did not answer within" not in said, said[-3000:]  # one line a flow, not the diff's too
    broker = _service(project, "standby-broker-0")
    assert broker["running"] is False
    assert f"standby-broker-0 is down: its process (pid {broker['pid']}) is not running" in said and \
        "fix: `pulumi up` starts it" in said, said[-3000:]  # not only `~ updated`
    for flow in _flow_resources(project):
        assert {s["state"] for s in flow["states"].values()} == {"UNREACHABLE"}, flow["states"]
        assert flow["connectors"] == next(f for f in flows if f["flow"] == flow["flow"])["connectors"]  # as last seen

    # 2. the worker is gone too: the supervisor says once that it cannot read Connect (checks every second)
    errors = _check_errors(out)
    (worker,) = _connect_workers(project)
    _killed(_service(project, worker.name))
    wait_until("5 more failed checks of the supervisor", lambda: _check_errors(out) >= errors + 5, timeout=60, every=1)
    assert _outages_said(_supervisor_log(project)[logged:])[-1:] == [CANNOT_READ]  # one line as it began
    # and the supervisor's keeper killed too (it takes the supervisor along): refresh says Connect is down, at
    # once, in one line a flow (not "did not answer" too), and names the dead worker and supervisor with the fix
    _killed(_service(project, SUPERVISOR))
    said, took = _timed_refresh(project)
    print(f"`pulumi refresh` with the Connect worker and the supervisor killed too took {took:.0f}s")
    assert took < REFRESH_BOUND, said[-3000:]
    assert f"Kafka Connect at {connect_url} is down" in said and "fix: `pulumi up` restarts the Connect workers" \
        in said, said[-3000:]
    assert "did not answer within" not in said, said[-3000:]
    assert _service(project, worker.name)["running"] is False
    assert f"{worker.name} is down: its process (pid {worker.pid}) is not running" in said, said[-3000:]
    assert _service(project, SUPERVISOR)["running"] is False
    assert f"{SUPERVISOR} is down, and so is its keeper" in said and "fix: `pulumi up` starts both" in said, \
        said[-3000:]

    # 3. up restarts the broker, the worker and the supervisor; the flow runs and copies again
    project.run("up", "--yes", "--skip-preview", timeout=900)
    assert is_alive(_supervised_process(project))
    for name in CONNECTORS:
        assert _status(connect_url, name)["connector"]["state"] == "RUNNING", name
    create_topic(primary, "after-outage", partitions=1, replication_factor=1)
    sent = produce(primary, "after-outage", 5, prefix="back")
    arrived = consume(standby, "primary.after-outage", expected=5, timeout=180)
    assert {r.value for r in arrived} == {r.value for r in sent}
    # and a group that commits on primary is checkpointed on standby, in MM2's checkpoints topic
    assert len(consume_group(primary, "after-outage", "billing", 3)) == 3
    deadline = time.monotonic() + 120
    while "primary.checkpoints.internal" not in topic_names(standby):
        assert time.monotonic() < deadline, "no primary.checkpoints.internal on standby after 120 s"
        time.sleep(0.5)


def test_a_separator_change_copies_the_history_again_under_the_new_names(deployed):
    """A live flow's separator changes: the plan marks each topic renamed, and `up`
    resets the connectors' offsets so every record arrives under the new name
    (before, the offsets carried on and the new topic got only new records)."""
    project, out = deployed
    primary, standby = out["clusters"]["primary"], out["clusters"]["standby"]
    create_topic(primary, "renamed", partitions=2, replication_factor=1)
    history = produce(primary, "renamed", 40, prefix="history")
    assert len(consume(standby, "primary.renamed", expected=40, timeout=180)) == 40

    # One flow of the pair alone: once the reverse flow runs (a failover), copies would come back
    # round primary -> standby -> primary for ever (issue 46); refused before anything changes
    project.run("config", "set", "--path", "mirrorstack:topology.flows[0].separator", "-")
    refused = project.run("preview", check=False, timeout=600)
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0, said[-4000:]
    assert "flows[0].separator, flows[1].separator: copies come back round the cycle primary -> standby -> primary" \
        in said, said[-4000:]

    # "_" on both: Kafka would refuse primary_renamed beside primary.renamed, and MM2 would stall on it:
    # `up` refuses the rename before changing anything, naming the collisions and the fix
    for i in (0, 1):
        project.run("config", "set", "--path", f"mirrorstack:topology.flows[{i}].separator", "_")
    refused = project.run("up", "--yes", "--skip-preview", check=False, timeout=900)
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and f"flow {FLOW}: nothing changed: " in said, said[-4000:]
    for name, clash in (("primary_renamed", "primary.renamed"),
                        ("primary_checkpoints_internal", "primary.checkpoints.internal")):
        assert f"{name}: collides with {clash} on standby" in said, said[-4000:]
    assert "fix: delete primary.renamed first" in said, said[-4000:]
    config = connect_rest.read(f"{out['connect']['standby']}/connectors/{quote(SOURCE, safe='')}/config")
    assert config["replication.policy.separator"] == "."

    # "-" renames without a collision
    for i in (0, 1):
        project.run("config", "set", "--path", f"mirrorstack:topology.flows[{i}].separator", "-")
    preview = project.run("preview", "--diff", timeout=600)
    said = preview.stdout + preview.stderr
    assert re.search(r"~ renamed +-> primary-renamed +renamed from primary\.renamed: copied again from the start; "
                     r"primary\.renamed stays", said), said[-4000:]
    assert "replication_policy or separator changed" in said, said[-4000:]

    up = project.run("up", "--yes", "--skip-preview", timeout=900)
    assert f"{SOURCE}: the replication policy or separator changed: offsets reset" in up.stdout + up.stderr, \
        (up.stdout + up.stderr)[-4000:]
    later = produce(primary, "renamed", 5, prefix="later")
    copied = wait_for_count(standby, "primary-renamed", 45)
    assert sorted(r.value for r in copied) == sorted(r.value for r in history + later)
    names = topic_names(standby)
    assert "primary.renamed" in names  # the old copy stays
    assert len(wait_for_count(standby, "primary.renamed", 40, timeout=10)) == 40  # and gets nothing new
