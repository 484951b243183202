"""The continuous validation in a running stack, through the real engine on the local platform:
`edge` flows into `central` with `validation.mode: continuous` and an RPO objective, Prometheus
scraping the validator every 2 s, producers writing all along and an independent consumer on
central counting and timing every copy.

1. a topic made after `up` is watched: Prometheus's confirmed count equals the consumer's, and
   once it is, the validator's mean latency of the next 100 copies agrees with the consumer's
   within one scrape interval;
2. the flow's source task paused past the window: the RPO rises above the objective and its
   alert fires, the records not copied within the window are counted missing and that alert
   fires; resumed, the RPO falls back and the late copies count as extras, one each;
3. the validator killed (SIGKILL) is started again by its keeper from its checkpoint: the
   figures go on from where they were, nothing counted twice or skipped
   (confirmed + missing = produced, duplicates 0).
"""
import os
import signal
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from confluent_kafka import Consumer, Producer

from mirrorstack.monitoring import alerts, metrics
from mirrorstack.platforms.local import keeper
from mirrorstack.platforms.local.launcher import is_alive
from mirrorstack.validation.continuous import SERVICE
from tests.support.kafka_clients import create_topic
from tests.support.processes import environment
from tests.support.stacks import stack_project
from tests.support.waiting import prometheus_query as query
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

FLOW = "edge->central"
SOURCE_CONNECTOR = f"{FLOW}.MirrorSourceConnector"
TOPIC, COPY = "orders-1", "edge.orders-1"
SMALL = {"heap": "384m"}
WINDOW, TRIGGER, SCRAPE, RPO = 15, 1, 2, 8  # seconds
TOPOLOGY = {
    "platform": "local",
    "clusters": {"edge": {"resources": SMALL}, "central": {"resources": SMALL}},
    "connect": {"central": {"kafka": "central", "resources": SMALL}},
    "flows": [{"source": "edge", "target": "central", "topics": ["orders-.*"], "heartbeats": False,
               "checkpoints": False, "rpo_seconds": RPO}],
    "monitoring": {"scrape_interval": f"{SCRAPE}s", "grafana": False},
    "validation": {"mode": "continuous", "continuous": {"window_seconds": WINDOW, "trigger_seconds": TRIGGER}},
}
RATE = 20  # records/s while the producer runs


class Writer:
    """Records into edge's topic at RATE/s until stopped; `sent` counts the acknowledged ones."""

    def __init__(self, bootstrap: str):
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5})
        self.sent, self.failed, self.n = 0, [], 0
        self.stopping = threading.Event()
        self.thread = None

    def _delivered(self, err, _msg):
        if err:
            self.failed.append(err)
        else:
            self.sent += 1

    def _run(self):
        while not self.stopping.is_set():
            self.producer.produce(TOPIC, key=f"k{self.n}".encode(), value=f"v{self.n}".encode(),
                                  on_delivery=self._delivered)
            self.n += 1
            self.producer.poll(0)
            time.sleep(1 / RATE)
        assert self.producer.flush(30) == 0

    def start(self):
        self.stopping.clear()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def stop(self) -> int:
        self.stopping.set()
        self.thread.join(60)
        assert not self.failed, self.failed
        return self.sent


class Reader:
    """An independent consumer of the copies on central: each record's arrival by its own clock."""

    def __init__(self, bootstrap: str):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "independent-reader",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        self.consumer.subscribe([COPY])
        self.latencies: list[float] = []  # arrival - the record's timestamp, per copy
        self.keys: set[bytes] = set()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping.is_set():
            for message in self.consumer.consume(500, timeout=0.2):
                if message.error() is None:
                    self.latencies.append(time.time() - message.timestamp()[1] / 1000)
                    self.keys.add(message.key())

    def stop(self):
        self.stopping.set()
        self.thread.join(30)
        self.consumer.close()


def value(prometheus: str, expr: str) -> float | None:
    result = query(prometheus, expr)
    return float(result[0]["value"][1]) if result else None


def totals(prometheus: str) -> dict[str, float]:
    """The validator's counters for the copy, as Prometheus scraped them last."""
    names = {"confirmed": metrics.DELIVERY_CONFIRMED, "missing": metrics.DELIVERY_MISSING,
             "duplicates": metrics.DELIVERY_DUPLICATES, "extras": metrics.DELIVERY_EXTRAS}
    return {k: value(prometheus, f'sum({name}{{topic="{COPY}"}})') for k, name in names.items()}


def latency(prometheus: str) -> tuple[float, float]:
    """The copy's latency histogram as scraped last: (count, sum of seconds)."""
    count, total = (value(prometheus, f'sum({metrics.DELIVERY_LATENCY}_{part}{{topic="{COPY}"}})')
                    for part in ("count", "sum"))
    return count, total


def write_and_confirm(prometheus: str, reader: "Reader", writer: "Writer", until: int) -> int:
    """Records written until `until` were acknowledged; then read by the consumer and confirmed."""
    writer.start()
    wait_until(f"{until} records written", lambda: writer.sent >= until, every=0.2)
    sent = writer.stop()
    wait_until(f"the consumer reading all {sent} copies", lambda: len(reader.keys) == sent)
    wait_until(f"Prometheus: {sent} confirmed", lambda: totals(prometheus)["confirmed"] == sent)
    return sent


def jvm_environment(pid: int) -> dict[str, str]:
    """The environment of the one Java process the validator `pid` started (its Spark driver)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    jvms = [c for c in children if Path(f"/proc/{c}/exe").resolve().name == "java"]
    assert len(jvms) == 1, children
    return environment(int(jvms[0]))


def firing(prometheus: str, alert: str) -> list[dict]:
    return query(prometheus, f'ALERTS{{alertname="{alert}", alertstate="firing"}}')


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with stack_project("dev-copy", tmp_path_factory.mktemp("continuous-stack"), topology=TOPOLOGY) as project:
        project.run("up", "--yes", "--skip-preview", timeout=900)
        project.run("preview", "--expect-no-changes", timeout=300)  # the validator's inputs are stable
        project.out = project.outputs()
        yield project
        project.run("destroy", "--yes", "--skip-preview", timeout=600)


def test_continuous_validation_watches_a_running_stack(stack):
    try:
        _watch(stack)
    except AssertionError as failed:  # what the validator said, which the stack's teardown removes
        log = stack.local_dir / SERVICE / "service.log"
        said = log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"
        raise AssertionError(f"{failed}\nthe validator's log ends:\n{said}") from failed


def _watch(stack):
    out = stack.out
    prometheus, edge, central = out["prometheus_url"], out["clusters"]["edge"], out["clusters"]["central"]
    assert {alerts.MISSING_ALERT, alerts.RPO_ALERT, alerts.VALIDATOR_DOWN_ALERT} <= set(out["alert_rules"])
    assert "validation" not in out  # mode continuous: no one-shot job in `up`
    wait_until("Prometheus scraping the validator", lambda: value(prometheus, 'up{role="validator"}') == 1)
    wait_until("the flow's RPO at 0 before any topic",
               lambda: value(prometheus, f'{metrics.DELIVERY_RPO_SECONDS}{{flow="{FLOW}"}}') == 0)

    # 1. a topic made now; records at RATE/s, counted by both: a first few, then 100 more timed by both
    create_topic(edge, TOPIC, partitions=2, replication_factor=1)
    reader, writer = Reader(central), Writer(edge)
    try:
        start = write_and_confirm(prometheus, reader, writer, 20)
        timed = latency(prometheus)
        first = write_and_confirm(prometheus, reader, writer, start + 100)
        assert totals(prometheus) == {"confirmed": first, "missing": 0, "duplicates": 0, "extras": 0}
        assert len(reader.latencies) == first  # no copy twice
        (count, total), independent = latency(prometheus), reader.latencies[start:]
        count, mean = count - timed[0], (total - timed[1]) / (count - timed[0])
        independent = sum(independent) / len(independent)
        print(f"\n{count:.0f} copies: mean latency {mean:.2f}s by the validator, {independent:.2f}s by the consumer")
        assert count == first - start and abs(mean - independent) <= SCRAPE, (mean, independent)

        # 2. the source task paused (out of band: the supervisor leaves a paused connector alone)
        connect = out["connect"]["central"]
        requests.put(f"{connect}/connectors/{quote(SOURCE_CONNECTOR, safe='')}/pause", timeout=30).raise_for_status()
        paused_at = time.time()
        writer.start()
        rpo = wait_until("the RPO alert firing", lambda: firing(prometheus, alerts.RPO_ALERT), timeout=90)
        assert rpo[0]["metric"]["flow"] == FLOW
        rpo_seen = value(prometheus, f'max({metrics.DELIVERY_RPO_SECONDS}{{flow="{FLOW}"}})')
        assert RPO < rpo_seen <= time.time() - paused_at + SCRAPE, rpo_seen
        wait_until("the missing alert firing", lambda: firing(prometheus, alerts.MISSING_ALERT), timeout=90)
        lost = totals(prometheus)["missing"]
        assert lost > 0 and value(prometheus, f'max({metrics.DELIVERY_RPO_RECORDS}{{flow="{FLOW}"}})') > 0
        requests.put(f"{connect}/connectors/{quote(SOURCE_CONNECTOR, safe='')}/resume", timeout=30).raise_for_status()
        second = writer.stop() - first
        wait_until("the RPO back under its objective", lambda: value(
            prometheus, f'max({metrics.DELIVERY_RPO_SECONDS}{{flow="{FLOW}"}})') < RPO, timeout=90)
        done = wait_until("every record confirmed or missing, each late copy an extra", lambda: (
            t := totals(prometheus))["confirmed"] + t["missing"] == first + second and t["extras"] == t["missing"]
            and t, timeout=WINDOW + 90)
        print(f"paused: RPO {rpo_seen:.1f}s seen, {done['missing']:.0f} of {second} records missing and as many "
              "late copies extra")
        assert done["duplicates"] == 0 and done["missing"] >= lost, done

        # 3. the validator killed: its keeper starts it again, from the checkpoint
        status = stack.local_dir / SERVICE / keeper.STATUS_FILE
        killed = keeper.current(status)
        assert killed is not None and is_alive(killed), killed
        assert [jvm_environment(killed.pid).get("MALLOC_ARENA_MAX")] == ["2"]  # its driver JVM's, few arenas
        os.kill(killed.pid, signal.SIGKILL)
        wait_until("a new validator process", lambda: (now := keeper.current(status)) is not None
                   and now.pid != killed.pid and is_alive(now), timeout=60)
        writer.start()
        wait_until("60 more records written", lambda: writer.sent >= first + second + 60, every=0.2)
        third = writer.stop() - first - second
        final = wait_until("the records made since confirmed once", lambda: (
            t := totals(prometheus))["confirmed"] == done["confirmed"] + third and t, timeout=180)
        reached = time.time()  # then later batches, scraped: a count that went past would show
        wait_until("later batches scraped", lambda: value(prometheus, metrics.DELIVERY_LAST_BATCH) > reached + 3 * TRIGGER)
        assert totals(prometheus) == {**final, "confirmed": done["confirmed"] + third}
        assert (final["missing"], final["duplicates"], final["extras"]) == (done["missing"], 0, done["extras"])
        assert len(reader.keys) == first + second + third
        assert not firing(prometheus, alerts.VALIDATOR_DOWN_ALERT)
    finally:
        reader.stop()
        if not writer.stopping.is_set():
            writer.stop()
