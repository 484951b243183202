"""Faults while replicating real records on the local platform, each checked by
the Spark validation job (the stack output `validation` of a re-run `up`):

- kill -9 one of two Connect workers while 300k records per flow are produced at a
  steady rate (replication is fast enough to drain a burst before the kill):
  0 missing on both flows; the at-least-once flow's duplicates are counted,
  the exactly-once flow has none;
- kill -9 one broker of the 2-broker target (remote topics RF 2): 0 missing.
"""
import json
import os
import signal
import threading
import time
from urllib.parse import quote

import pytest
import requests
from confluent_kafka import Consumer

from tests.support.kafka_clients import create_topic, produce
from tests.support.stacks import stack_project

pytestmark = pytest.mark.integration

RECORDS = 300_000
RATE = 5_000  # records/s per region: 60 s of production; MM2 finds the new topic and catches up well before
FAST_FAILOVER = {
    # A dead worker's tasks move after 5 s (Connect waits 5 minutes by default
    # for the worker to come back), and offsets are committed every 10 s.
    "scheduled.rebalance.max.delay.ms": "5000",
    "offset.flush.interval.ms": "10000",
}
FLOW = {"topics": ["orders"], "heartbeats": False, "checkpoints": False, "tasks_max": 4, "refresh_seconds": 5}
TOPOLOGY = {
    "platform": "local",
    "clusters": {"us": {"brokers": 1}, "uk": {"brokers": 1}, "central": {"brokers": 2}},
    "connect": {"eos": {"kafka": "central", "workers": 2, "settings": FAST_FAILOVER},
                "alo": {"kafka": "central", "workers": 2, "settings": FAST_FAILOVER}},
    "flows": [{"source": "us", "target": "central", "connect": "eos", "exactly_once": True, **FLOW},
              {"source": "uk", "target": "central", "connect": "alo", **FLOW}],
    "validation": {"wait_seconds": 300, "tolerance": {"duplicates": "unlimited"}},
}


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults")
    with stack_project("aggregation", tmp, topology=TOPOLOGY) as project:
        project.run("up", "--yes", "--skip-preview", timeout=1200)
        project.out = project.outputs()
        for region in ("us", "uk"):
            create_topic(project.out["clusters"][region], "orders", partitions=6, replication_factor=1)
        yield project
        project.run("destroy", "--yes", "--skip-preview", timeout=900)


def _services(project) -> dict[str, dict]:
    resources = json.loads(project.run("stack", "export").stdout)["deployment"]["resources"]
    return {r["outputs"]["name"]: r["outputs"] for r in resources
            if r.get("outputs", {}).get("pid") and r["outputs"].get("argv")}


def _kill9(project, service: str) -> None:
    """SIGKILL one of this stack's services, by its own pid (checked against its command line)."""
    pid = int(_services(project)[service]["pid"])
    assert str(project.local_dir) in open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="ignore")
    os.kill(pid, signal.SIGKILL)


def _committed_count(bootstrap: str, topic: str, at_least: int, timeout: float) -> int:
    """Records a read_committed consumer sees in `topic`, read until `at_least` or the timeout."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{time.monotonic_ns()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "topic.metadata.refresh.interval.ms": 1000})
    consumer.subscribe([topic])
    count, deadline = 0, time.monotonic() + timeout
    try:
        while count < at_least and time.monotonic() < deadline:
            count += sum(1 for m in consumer.consume(num_messages=10_000, timeout=1.0) if not m.error())
    finally:
        consumer.close()
    return count


def _worker_with_source_task(project, connect: str, flow: str) -> str:
    """The worker service running a task of the flow's source connector."""
    url = project.out["connect"][connect]
    name = quote(f"{flow}.MirrorSourceConnector", safe="")
    for _ in range(120):
        tasks = requests.get(f"{url}/connectors/{name}/status", timeout=10).json().get("tasks", [])
        workers = {t["worker_id"] for t in tasks if t["state"] == "RUNNING"}
        if workers:
            port = sorted(workers)[-1].rsplit(":", 1)[1]
            return next(s for s, o in _services(project).items()
                        if s.startswith(f"connect-{connect}-") and o["health"]["url"].endswith(f":{port}"))
        time.sleep(1)
    raise AssertionError(f"no RUNNING task of {flow} on {connect}")


def _produce_in_background(project, count: int, prefix: str) -> list[threading.Thread]:
    threads = [threading.Thread(target=produce, args=(project.out["clusters"][region], "orders", count),
                                kwargs={"prefix": f"{prefix}-{region}", "per_second": RATE})
               for region in ("us", "uk")]
    for t in threads:
        t.start()
    return threads


def _validate(project, run_id: str) -> dict:
    """`up` restarts what was killed, then re-runs the validation job."""
    project.run("up", "--yes", "--skip-preview", "--refresh", "--config", f"mirrorstack:validationRunId={run_id}",
                timeout=1800)
    return project.outputs()["validation"]


def test_kill_one_of_two_connect_workers_mid_replication(faults):
    project, central = faults, faults.out["clusters"]["central"]
    threads = _produce_in_background(project, RECORDS, "worker-kill")
    victims = {c: _worker_with_source_task(project, c, f) for c, f in (("eos", "us->central"), ("alo", "uk->central"))}
    # Kill in the middle: once a tenth has arrived on each remote topic.
    for topic in ("us.orders", "uk.orders"):
        assert _committed_count(central, topic, RECORDS // 10, timeout=300) >= RECORDS // 10
    # Still producing: records the dead tasks sent since their last offset commit are re-sent.
    assert all(t.is_alive() for t in threads), "production ended before the kill: raise RECORDS or lower RATE"
    for victim in victims.values():
        _kill9(project, victim)
    for t in threads:
        t.join()
    # The surviving worker of each group takes the tasks over and finishes.
    for topic in ("us.orders", "uk.orders"):
        assert _committed_count(central, topic, RECORDS, timeout=900) >= RECORDS, topic

    report = _validate(project, "after-worker-kill")
    eos, alo = report["flows"]["us->central"], report["flows"]["uk->central"]
    print("validation after kill -9 of", victims, json.dumps(report["flows"], indent=1))
    assert (eos["source_records"], eos["matched"], eos["missing"], eos["duplicates"]) == (RECORDS, RECORDS, 0, 0)
    assert (alo["source_records"], alo["matched"], alo["missing"]) == (RECORDS, RECORDS, 0)
    assert alo["duplicates"] > 0  # at-least-once: re-sent since the last offset commit, counted
    assert report["passed"] is True, report


def test_kill_one_broker_of_the_two_broker_target(faults):
    project, central = faults, faults.out["clusters"]["central"]
    before = {t: _committed_count(central, t, RECORDS, timeout=120) for t in ("us.orders", "uk.orders")}
    threads = _produce_in_background(project, RECORDS // 5, "broker-kill")
    assert _committed_count(central, "uk.orders", before["uk.orders"] + RECORDS // 50, timeout=300) > \
        before["uk.orders"]
    _kill9(project, "central-broker-1")
    for t in threads:
        t.join()
    report = _validate(project, "after-broker-kill")  # `up` restarts the broker first
    print("validation after kill -9 of central-broker-1", json.dumps(report["flows"], indent=1))
    expected = RECORDS + RECORDS // 5
    for flow in ("us->central", "uk->central"):
        counts = report["flows"][flow]
        assert (counts["source_records"], counts["matched"], counts["missing"]) == (expected, expected, 0), flow
    assert report["flows"]["us->central"]["duplicates"] == 0  # exactly-once through a broker failover too
    assert report["passed"] is True, report
