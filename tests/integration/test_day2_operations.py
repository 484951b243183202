"""Day-2 operations through the real engine on the local platform, one stack
brought up once: `us` (3 KRaft controllers, 3 brokers) flows into `eu`
(1 broker) through a 2-worker Connect group next to eu, validation added after the roll.

1. a non-first controller killed: topics (RF 3) are still created and written;
   the next `up` restarts it;
2. a broker and a worker setting changed in one `up` while a producer writes
   acks=all: brokers restart one at a time (never two down, in chain order),
   then the workers likewise; no failed send, nothing missing on eu;
3. a broker setting that stops the broker from starting: `up` fails on the
   first broker with the reason, the brokers after it keep running untouched;
   reverting it heals.
"""
import json
import os
import signal
import threading
import time

import pytest
import requests
import yaml
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from mirrorstack.platforms.local.launcher import ProcessHandle, is_alive
from tests.support.kafka_clients import SteadyProducer, create_topic, describe_partitions, produce
from tests.support.stacks import stack_project

pytestmark = pytest.mark.integration

STACK = "aggregation"  # any stack file: the topology below replaces its own
FLOW = "us->eu"
TOPIC = "orders"
BROKERS = ["us-broker-0", "us-broker-1", "us-broker-2"]
WORKERS = ["connect-eu-0", "connect-eu-1"]
SMALL = {"heap": "512m"}
TOPOLOGY = {
    "platform": "local",
    "clusters": {"us": {"brokers": 3, "controllers": 3, "resources": SMALL}, "eu": {"brokers": 1, "resources": SMALL}},
    "connect": {"eu": {"kafka": "eu", "workers": 2, "resources": SMALL}},
    "flows": [{"source": "us", "target": "eu", "topics": [TOPIC], "heartbeats": False, "checkpoints": False,
               "refresh_seconds": 5}],
}
# Added for the `up` after the roll (a first `up` would run it over no records). The flow is
# at-least-once: a task that the roll moves between workers re-copies what it sent after its last
# offset commit if its stop does not commit (a CI run counted 114 duplicates of 1,769 records with
# Kafka's 5 s graceful stop; benchmarks/roll_duplicates.py counted none alone with either setting,
# so no bound is asserted: under load a stop can still outlast it). Counted and printed; missing stays 0.
VALIDATION = {"wait_seconds": 120, "tolerance": {"duplicates": "unlimited"}}
# What the workers say about a task they stop or take over: printed when the roll duplicated records.
TASK_MOVES = ("Starting task", "Stopping task", "Committing offsets", "Graceful stop", "Skipping final offset",
              "Failed to commit offsets", "Joined group", "Broker coordinator was unreachable")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with stack_project(STACK, tmp_path_factory.mktemp("day2"), topology=TOPOLOGY) as project:
        started = time.monotonic()
        project.run("up", "--yes", "--skip-preview", timeout=1200)
        print(f"\nfirst `up` (3 controllers, 4 brokers, 2 workers, one at a time) took {time.monotonic() - started:.0f}s")
        project.out = project.outputs()
        us = project.out["clusters"]["us"]
        create_topic(us, TOPIC, partitions=3, replication_factor=3)
        _set_topic_config(us, TOPIC, "min.insync.replicas", "2")  # acks=all needs two live replicas
        yield project
        project.run("destroy", "--yes", "--skip-preview", timeout=900)


def _set_topic_config(bootstrap: str, topic: str, key: str, value: str) -> None:
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def _services(project) -> dict[str, dict]:
    """This stack's LocalServices by name, from its state (pid, start_time, …)."""
    resources = json.loads(project.run("stack", "export").stdout)["deployment"]["resources"]
    return {r["outputs"]["name"]: r["outputs"] for r in resources
            if r.get("outputs", {}).get("pid") and r["outputs"].get("argv")}


def _handle(outs: dict) -> ProcessHandle:
    return ProcessHandle(outs["name"], int(outs["pid"]), int(outs["start_time"]), outs["log_file"])


def _edit_topology(project, edit) -> None:
    """Change the stack file's topology in place (settings keys hold dots)."""
    path = project.dir / "stacks" / f"Pulumi.{STACK}.yaml"
    document = yaml.safe_load(path.read_text())
    edit(document["config"]["mirrorstack:topology"])
    path.write_text(yaml.safe_dump(document))


def test_a_killed_controller_leaves_the_cluster_working_and_up_restarts_it(stack):
    before = _services(stack)
    assert {"us-controller", "us-controller-1", "us-controller-2"} <= set(before)
    server = (stack.local_dir / "us-controller-2" / "server.properties").read_text()
    assert "node.id=1002" in server and "controller.quorum.voters=1@" in server and ",1002@" in server
    victim = _handle(before["us-controller-2"])
    assert is_alive(victim) and str(stack.local_dir) in open(f"/proc/{victim.pid}/cmdline", "rb").read().decode()
    os.kill(victim.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while is_alive(victim) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not is_alive(victim)

    us = stack.out["clusters"]["us"]
    create_topic(us, "after-kill", partitions=3, replication_factor=3)  # metadata changes need the quorum
    assert {len(r) for r, _ in describe_partitions(us, "after-kill").values()} == {3}
    assert len(produce(us, "after-kill", 200)) == 200

    up = stack.run("up", "--yes", "--skip-preview", timeout=900)
    after = _services(stack)
    assert int(after["us-controller-2"]["pid"]) != victim.pid and is_alive(_handle(after["us-controller-2"])), up.stdout
    unchanged = [n for n in before if n != "us-controller-2" and n in after]
    assert all(after[n]["pid"] == before[n]["pid"] for n in unchanged), up.stdout  # only the dead one restarted


class _Watch(threading.Thread):
    """Every ~200 ms: the registered brokers of `us`, which workers answer, and
    the brokers missing from some partition's ISR."""

    def __init__(self, bootstrap: str, worker_urls: dict[str, str]):
        super().__init__(daemon=True)
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.worker_urls = worker_urls
        self.samples: list[tuple[float, set[int], set[str]]] = []
        self.out_of_sync: list[set[int]] = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                metadata = self.admin.list_topics(timeout=2)
                brokers = set(metadata.brokers)
                self.out_of_sync.append({r for t in metadata.topics.values() for p in t.partitions.values()
                                         for r in set(p.replicas) - set(p.isrs)})
            except Exception:
                brokers = None  # no answer at all: recorded as none registered
            up = set()
            for name, url in self.worker_urls.items():
                try:
                    if requests.get(url, timeout=1).status_code == 200:
                        up.add(name)
                except requests.Timeout:
                    # a slow answer is no restart (a worker's /health waits on a rebalance the other's
                    # restart started): as in the sample before
                    if self.samples and name in self.samples[-1][2]:
                        up.add(name)
                except requests.RequestException:
                    pass
            self.samples.append((time.monotonic(), brokers if brokers is not None else set(), up))
            time.sleep(0.2)

    def down_intervals(self, member, pick) -> tuple[float, float] | None:
        """(first, last) sample time at which `member` was missing, None if never."""
        missing = [t for t, *sets in self.samples if member not in pick(sets)]
        return (missing[0], missing[-1]) if missing else None


def _wait_for(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout:.0f}s: {what}"
        time.sleep(0.1)


def _assert_one_at_a_time(watch: _Watch, members: list, pick, what: str) -> None:
    """Each member was missing for a while, in chain order, never two at once."""
    intervals = [watch.down_intervals(m, pick) for m in members]
    assert all(intervals), f"{what}: some never restarted: {dict(zip(members, intervals))}"
    for (_, end), (start, _) in zip(intervals, intervals[1:]):
        assert start > end, f"{what}: restarts overlap or are out of order: {dict(zip(members, intervals))}"


def test_broker_and_worker_settings_roll_one_at_a_time_without_a_failed_send(stack):
    before = _services(stack)
    us = stack.out["clusters"]["us"]
    workers = {name: before[name]["health"]["url"] for name in WORKERS}
    _edit_topology(stack, lambda t: (t["clusters"]["us"].setdefault("settings", {}).update(
        {"log.retention.ms": "86400000"}), t["connect"]["eu"].setdefault("settings", {}).update(
        {"offset.flush.interval.ms": "4000"})))

    watch, producer = _Watch(us, workers), SteadyProducer(us, TOPIC)
    watch.start(), producer.start()
    _wait_for(lambda: producer.delivered >= 20 and watch.samples, "traffic flows before the roll starts")
    started = time.monotonic()
    try:
        up = stack.run("up", "--yes", "--skip-preview", timeout=1200)
    finally:
        took = time.monotonic() - started
        delivered, ended = producer.delivered, time.monotonic()  # traffic and the watch go on past the roll
        _wait_for(lambda: producer.delivered >= delivered + 20 and watch.samples[-1][0] > ended + 1,
                  "traffic after the roll")
        producer.stop.set(), producer.join(120)
        watch.stop.set(), watch.join(10)
    print(f"\nrolling `up` (3 brokers, 2 workers) took {took:.0f}s; {producer.delivered} records sent meanwhile")

    after = _services(stack)
    for name in [*BROKERS, *WORKERS]:  # every one restarted with the new files
        assert after[name]["pid"] != before[name]["pid"], (name, up.stdout[-3000:])
    assert "log.retention.ms=86400000" in (stack.local_dir / "us-broker-2" / "server.properties").read_text()
    for chain in (BROKERS, WORKERS):  # started in chain order (start times, clock ticks since boot)
        starts = [int(after[n]["start_time"]) for n in chain]
        assert starts == sorted(starts) and len(set(starts)) == len(starts), dict(zip(chain, starts))
    assert min(len(brokers) for _, brokers, _ in watch.samples) >= 2, "two brokers were down at once"
    # the next broker went only once every replica of the one before was in sync again
    assert max(len(lagging) for lagging in watch.out_of_sync) == 1, [x for x in watch.out_of_sync if len(x) > 1][:5]
    _assert_one_at_a_time(watch, [2, 3, 4], lambda sets: sets[0], "brokers")  # node ids of us-broker-0..2
    _assert_one_at_a_time(watch, WORKERS, lambda sets: sets[1], "workers")
    progress = [line.strip() for line in (up.stdout + up.stderr).splitlines() if "mirrorstack: us-broker-" in line]
    print("\n".join(progress[:6]))
    assert progress, up.stdout[-3000:]  # progress was shown

    assert producer.errors == [] and producer.remaining == 0, producer.errors[:3]
    assert producer.delivered == producer.sent > 100

    _edit_topology(stack, lambda t: t.update(validation=VALIDATION))
    stack.run("up", "--yes", "--skip-preview", "--config", "mirrorstack:validationRunId=after-roll", timeout=900)
    counts = stack.outputs()["validation"]["flows"][FLOW]
    assert counts["missing"] == 0 and counts["source_records"] >= producer.delivered, counts
    assert counts["matched"] == counts["source_records"], counts
    print(f"after the roll: {counts['matched']} matched, {counts['duplicates']} duplicates (at-least-once)")
    if counts["duplicates"]:
        for worker in WORKERS:
            lines = (stack.local_dir / worker / "service.log").read_text(errors="replace").splitlines()
            print(f"{worker}:", *[line[:240] for line in lines if any(m in line for m in TASK_MOVES)], sep="\n  ")


def test_a_broker_that_cannot_start_stops_the_roll_and_reverting_heals(stack):
    before = _services(stack)
    _edit_topology(stack, lambda t: t["clusters"]["us"]["settings"].update({"num.network.threads": "none"}))
    failed = stack.run("up", "--yes", "--skip-preview", check=False, timeout=900)
    text = failed.stdout + failed.stderr
    assert failed.returncode != 0, text[-3000:]
    # the storage format, the broker's first start step, already refuses the setting
    assert "us-broker-0 prepare exited with 1" in text, text[-4000:]
    assert "Invalid value none for configuration num.network.threads" in text, text[-4000:]
    after = _services(stack)
    assert not is_alive(_handle(after["us-broker-0"]))  # stopped for the update, not started again
    for name in ("us-broker-1", "us-broker-2"):  # the roll stopped before them
        assert after[name]["pid"] == before[name]["pid"] and is_alive(_handle(after[name])), name

    _edit_topology(stack, lambda t: t["clusters"]["us"]["settings"].pop("num.network.threads"))
    stack.run("up", "--yes", "--skip-preview", timeout=900)
    healed = _services(stack)
    assert is_alive(_handle(healed["us-broker-0"])) and healed["us-broker-0"]["pid"] != before["us-broker-0"]["pid"]
    assert all(healed[n]["pid"] == before[n]["pid"] for n in ("us-broker-1", "us-broker-2"))
    stack.run("up", "--yes", "--expect-no-changes", timeout=600)


def test_a_new_controller_count_for_the_deployed_cluster_is_refused_before_any_node_changes(stack):
    before = _services(stack)
    _edit_topology(stack, lambda t: t["clusters"]["us"].update({"controllers": 1}))
    try:
        refused = stack.run("up", "--yes", "--skip-preview", check=False, timeout=600)
    finally:
        _edit_topology(stack, lambda t: t["clusters"]["us"].update({"controllers": 3}))
    text = refused.stdout + refused.stderr
    assert refused.returncode != 0, text[-3000:]
    assert "clusters.us.controllers: the deployed cluster runs 3 controller(s), not 1" in text, text[-3000:]
    after = _services(stack)
    assert {n: o["pid"] for n, o in after.items()} == {n: o["pid"] for n, o in before.items()}
    assert stack.outputs()["controllers"] == {"us": 3, "eu": 1}
    stack.run("up", "--yes", "--expect-no-changes", timeout=600)  # back at 3: nothing to do
