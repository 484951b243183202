"""Faults while replicating real records on the local platform, each checked by
the Spark validation job (the stack output `validation` of a re-run `up`):

- kill -9 one of two Connect workers while records are produced at a steady
  rate: 0 missing on both flows; the at-least-once flow's duplicates are
  counted (its victim is killed only while it holds replicated records whose
  source offsets are not committed yet), the exactly-once flow has none;
- kill -9 one broker of the 2-broker target (remote topics RF 2): 0 missing.

How many records are produced is decided by conditions, not by a volume:
production runs until the fault happened and replication went on past it.
"""
import json
import os
import signal
import threading
import time
import uuid
from urllib.parse import quote

import pytest
import requests
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.kafka_clients import create_topic
from tests.support.stacks import stack_project

pytestmark = pytest.mark.integration

# records/s per region while a fault lands: steady traffic the flows replicate as it comes;
# any rate works (the worker kill waits for uncommitted progress, production lasts until
# the fault is over), a low one keeps the 2 cores free and the validation's reads short.
RATE = 1_000
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
PARTITIONS = 6
SOURCE = {"eos": "us->central", "alo": "uk->central"}


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults")
    with stack_project("aggregation", tmp, topology=TOPOLOGY) as project:
        project.run("up", "--yes", "--skip-preview", timeout=1200)
        project.out = project.outputs()
        for region in ("us", "uk"):
            create_topic(project.out["clusters"][region], "orders", partitions=PARTITIONS, replication_factor=1)
        project.sent = {"us": 0, "uk": 0}  # records in each source topic so far
        yield project
        project.run("destroy", "--yes", "--skip-preview", timeout=900)


def _services(project) -> dict[str, dict]:
    resources = json.loads(project.run("stack", "export").stdout)["deployment"]["resources"]
    return {r["outputs"]["name"]: r["outputs"] for r in resources
            if r.get("outputs", {}).get("pid") and r["outputs"].get("argv")}


def _signal(project, service: str, sig: int, services: dict | None = None) -> None:
    """Signal one of this stack's services, by its own pid (checked against its command line)."""
    pid = int((services or _services(project))[service]["pid"])
    assert str(project.local_dir) in open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="ignore")
    os.kill(pid, sig)


def _kill9(project, service: str, services: dict | None = None) -> None:
    """SIGKILL one of this stack's services, by its own pid (checked against its command line)."""
    _signal(project, service, signal.SIGKILL, services)


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


class _Production(threading.Thread):
    """A region's app: keyed records to `orders`, acks=all, at RATE until `stop`."""

    def __init__(self, bootstrap: str, prefix: str):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5})
        self.prefix, self.sent, self.delivered, self.errors = prefix, 0, 0, []
        self.stop, self.remaining = threading.Event(), None

    def _report(self, err, _msg) -> None:
        if err:
            self.errors.append(err)
        else:
            self.delivered += 1

    def run(self) -> None:
        started = time.monotonic()
        while not self.stop.is_set():
            if self.sent % 100 == 0:
                time.sleep(max(0.0, started + self.sent / RATE - time.monotonic()))
            self.producer.produce("orders", key=f"{self.prefix}-key-{self.sent % 97}".encode(),
                                  value=f"{self.prefix}-value-{self.sent}-{uuid.uuid4().hex}".encode(),
                                  on_delivery=self._report)
            self.sent += 1
            self.producer.poll(0)
        self.remaining = self.producer.flush(60)


def _produce_in_background(project, prefix: str) -> dict[str, _Production]:
    apps = {region: _Production(project.out["clusters"][region], f"{prefix}-{region}") for region in ("us", "uk")}
    for app in apps.values():
        app.start()
    return apps


def _produce_more(apps: dict[str, _Production], records: int, timeout: float = 120) -> None:
    """Wait until each region produced `records` more than now."""
    wanted, deadline = {r: app.sent + records for r, app in apps.items()}, time.monotonic() + timeout
    while any(app.sent < wanted[r] for r, app in apps.items()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(app.sent >= wanted[r] for r, app in apps.items()), "production stalled"


def _fenced(bootstrap: str, remaining: int, timeout: float = 120) -> None:
    """Wait until the cluster's metadata lists only `remaining` live brokers."""
    admin, deadline, brokers = AdminClient({"bootstrap.servers": bootstrap}), time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            brokers = admin.list_topics(timeout=5).brokers
        except KafkaException:
            brokers = None
        if brokers is not None and len(brokers) == remaining:
            return
        time.sleep(0.5)
    raise AssertionError(f"{bootstrap}: still {len(brokers or {})} brokers listed after {timeout:.0f}s")


def _stop(project, apps: dict[str, _Production]) -> None:
    """Stop producing; every record was delivered; count them into the source totals."""
    for app in apps.values():
        app.stop.set()
    for region, app in apps.items():
        app.join(120)
        assert not app.is_alive() and app.errors == [] and app.remaining == 0 and app.delivered == app.sent, \
            (region, app.errors[:3], app.remaining, app.delivered, app.sent)
        project.sent[region] += app.sent


def _workers(project, connect: str, services: dict) -> dict[str, tuple[str, str]]:
    """worker id (host:port, as task status names it) → (service, REST URL) of the group's workers."""
    out = {}
    for service, outputs in services.items():
        if service.startswith(f"connect-{connect}-"):
            url = outputs["health"]["url"]
            out[url.removeprefix("http://")] = (service, url)
    return out


def _source_tasks(url: str, flow: str) -> dict[int, tuple[str, str, list[int]]]:
    """task id → (state, worker id, source partitions) of the flow's source connector."""
    name = quote(f"{flow}.MirrorSourceConnector", safe="")
    status = requests.get(f"{url}/connectors/{name}/status", timeout=10).json().get("tasks", [])
    configs = requests.get(f"{url}/connectors/{name}/tasks", timeout=10).json()
    partitions = {t["id"]["task"]: [int(tp.rsplit("-", 1)[1]) for tp in
                                    t["config"].get("task.assigned.partitions", "").split(",") if tp]
                  for t in configs}
    return {t["id"]: (t["state"], t["worker_id"], partitions.get(t["id"], [])) for t in status}


def _committed_offsets(bootstrap: str, offsets_topic: str, connector: str) -> dict[int, int]:
    """Source partition → the source offset last committed for `connector`, from the
    Connect group's offsets topic read to its end (key: [connector, {partition...}],
    value: {"offset": n})."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"offsets-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        partitions = consumer.list_topics(offsets_topic, timeout=10).topics[offsets_topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(offsets_topic, p), timeout=10) for p in partitions}
        pending = {p for p, (low, high) in ends.items() if high > low}
        consumer.assign([TopicPartition(offsets_topic, p, ends[p][0]) for p in pending])
        committed, deadline = {}, time.monotonic() + 60
        while pending and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=1000, timeout=1.0):
                if m.error():
                    continue
                if m.offset() + 1 >= ends[m.partition()][1]:
                    pending.discard(m.partition())
                name, source = json.loads(m.key())
                if name == connector and m.value() is not None:
                    committed[int(source["partition"])] = int(json.loads(m.value())["offset"])
                elif name == connector:
                    committed.pop(int(source["partition"]), None)
            for p in list(pending):  # transaction markers: the position passes the end without a record
                if consumer.position([TopicPartition(offsets_topic, p)])[0].offset >= ends[p][1]:
                    pending.discard(p)
        assert not pending, f"could not read {offsets_topic} to its end"
        return committed
    finally:
        consumer.close()


def _replicated_counts(bootstrap: str, topic: str, partitions: list[int]) -> dict[int, int]:
    """Records in each partition of a non-transactional remote topic (its high watermark)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"hw-{time.monotonic_ns()}"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    finally:
        consumer.close()


def _kill_worker_with_uncommitted_records(project, services: dict, connect: str, topic: str,
                                          timeout: float = 120) -> dict:
    """kill -9 a worker of the at-least-once group at a moment it holds records it
    replicated but whose source offsets are not committed: its successor must re-send
    them, so duplicates are certain, not luck. The worker is frozen (SIGSTOP) while its
    committed offsets and the target's records are compared, so what is measured is
    exactly what it leaves behind; without such records (an offset commit just
    happened) it resumes and the check repeats."""
    central, flow = project.out["clusters"]["central"], SOURCE[connect]
    workers = _workers(project, connect, services)
    offsets_topic = f"{project.out['connect_groups'][connect]}-offsets"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tasks = _source_tasks(next(iter(workers.values()))[1], flow)
        held = {}
        for state, worker, partitions in tasks.values():
            if state == "RUNNING" and worker in workers:
                held.setdefault(worker, []).extend(partitions)
        for victim in sorted(held, reverse=True):
            service, killed = workers[victim][0], False
            _signal(project, service, signal.SIGSTOP, services)
            try:
                committed = _committed_offsets(central, offsets_topic, f"{flow}.MirrorSourceConnector")
                replicated = _replicated_counts(central, topic, held[victim])
                uncommitted = {p: n - (committed[p] + 1 if p in committed else 0) for p, n in replicated.items()}
                if any(n > 0 for n in uncommitted.values()):
                    _kill9(project, service, services)
                    killed = True
                    return {"victim": service, "partitions": held[victim], "uncommitted": uncommitted}
            finally:
                if not killed:
                    _signal(project, service, signal.SIGCONT, services)
        time.sleep(0.5)
    raise AssertionError(f"no worker of {connect} held uncommitted replicated records within {timeout:.0f}s")


def _kill_worker_with_task(project, services: dict, connect: str, timeout: float = 120) -> dict:
    """kill -9 a worker of the group that runs a task of the flow's source connector now."""
    workers = _workers(project, connect, services)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tasks = _source_tasks(next(iter(workers.values()))[1], SOURCE[connect])
        running = sorted(w for state, w, _ in tasks.values() if state == "RUNNING" and w in workers)
        if running:
            _kill9(project, workers[running[-1]][0], services)
            return {"victim": workers[running[-1]][0]}
        time.sleep(0.5)
    raise AssertionError(f"no RUNNING task of {SOURCE[connect]} on {connect}")


def _taken_over(project, services: dict, connect: str, victim: str, timeout: float = 180) -> None:
    """Wait until the surviving worker runs every task of the flow's source connector."""
    workers = _workers(project, connect, services)
    (survivor, url), = [(w, u) for w, (s, u) in workers.items() if s != victim]
    deadline, tasks = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        try:
            tasks = _source_tasks(url, SOURCE[connect])
        except requests.RequestException:
            tasks = {}
        if tasks and all(state == "RUNNING" and worker == survivor for state, worker, _ in tasks.values()):
            return
        time.sleep(0.5)
    raise AssertionError(f"{survivor} did not take over {SOURCE[connect]}'s tasks within {timeout:.0f}s: {tasks}")


def _validate(project, run_id: str) -> dict:
    """`up` restarts what was killed, then re-runs the validation job."""
    project.run("up", "--yes", "--skip-preview", "--refresh", "--config", f"mirrorstack:validationRunId={run_id}",
                timeout=1800)
    return project.outputs()["validation"]


def test_kill_one_of_two_connect_workers_mid_replication(faults):
    project, central = faults, faults.out["clusters"]["central"]
    services = _services(project)  # pids and REST URLs of the running workers
    started, phases = time.monotonic(), {}
    apps = _produce_in_background(project, "worker-kill")
    # Kill in the middle: once a second's worth of records arrived on each remote topic.
    for topic in ("us.orders", "uk.orders"):
        assert _committed_count(central, topic, RATE, timeout=300) >= RATE
    phases["arrived"] = time.monotonic() - started  # cumulative seconds since production started
    victims = {"eos": _kill_worker_with_task(project, services, "eos"),
               "alo": _kill_worker_with_uncommitted_records(project, services, "alo", "uk.orders")}
    phases["killed"] = time.monotonic() - started
    # Still producing: records the dead tasks sent since their last offset commit are re-sent.
    assert all(app.is_alive() for app in apps.values()), "production ended before the kill"
    # The surviving worker of each group takes the tasks over while records still flow, and finishes.
    for connect, victim in victims.items():
        _taken_over(project, services, connect, victim["victim"])
    assert all(app.is_alive() for app in apps.values()), "production ended before the takeover"
    phases["taken over"] = time.monotonic() - started
    taken_over_at = {region: app.sent for region, app in apps.items()}
    for region in ("us", "uk"):  # the survivors replicate what was produced up to the takeover, producing on
        assert _committed_count(central, f"{region}.orders", taken_over_at[region], timeout=300) >= \
            taken_over_at[region], region
    _stop(project, apps)
    phases["produced"] = time.monotonic() - started
    for region in ("us", "uk"):
        assert _committed_count(central, f"{region}.orders", project.sent[region], timeout=900) >= \
            project.sent[region], region
    phases["replicated"] = time.monotonic() - started

    report = _validate(project, "after-worker-kill")
    eos, alo = report["flows"]["us->central"], report["flows"]["uk->central"]
    phases["validated"] = time.monotonic() - started
    print("validation after kill -9 of", victims, "phases (s):", {k: round(v) for k, v in phases.items()},
          json.dumps(report["flows"], indent=1))
    us, uk = project.sent["us"], project.sent["uk"]
    assert (eos["source_records"], eos["matched"], eos["missing"], eos["duplicates"]) == (us, us, 0, 0)
    assert (alo["source_records"], alo["matched"], alo["missing"]) == (uk, uk, 0)
    assert alo["duplicates"] > 0  # at-least-once: re-sent since the last offset commit, counted
    assert report["passed"] is True, report


def test_kill_one_broker_of_the_two_broker_target(faults):
    project, central = faults, faults.out["clusters"]["central"]
    before = {t: _committed_count(central, t, project.sent[t[:2]], timeout=120) for t in ("us.orders", "uk.orders")}
    apps = _produce_in_background(project, "broker-kill")
    assert _committed_count(central, "uk.orders", before["uk.orders"] + RATE, timeout=300) > \
        before["uk.orders"]
    _kill9(project, "central-broker-1")
    # Records still flow through the failover: production goes on until the cluster has
    # fenced the dead broker (its partitions led by the survivor), then a second's worth
    # more (the flows replicate it all once the broker is back: `up` restarts it below,
    # and the validation waits for both flows to catch up).
    _fenced(central, remaining=1)
    _produce_more(apps, RATE)
    assert all(app.is_alive() for app in apps.values()), "production ended before the kill"
    _stop(project, apps)
    report = _validate(project, "after-broker-kill")  # `up` restarts the broker first
    print("validation after kill -9 of central-broker-1", json.dumps(report["flows"], indent=1))
    for flow, region in (("us->central", "us"), ("uk->central", "uk")):
        expected = project.sent[region]
        counts = report["flows"][flow]
        assert (counts["source_records"], counts["matched"], counts["missing"]) == (expected, expected, 0), flow
    assert report["flows"]["us->central"]["duplicates"] == 0  # exactly-once through a broker failover too
    assert report["passed"] is True, report
