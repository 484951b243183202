"""`make demo`: bring up the aggregation stack, send records into each source
cluster, show them arriving, merged, in the central cluster, then re-run the
stack's Spark validation job and show its report.

The demo leaves the checkout as it found it: its stack config is a git-ignored
copy of stacks/Pulumi.aggregation.yaml (DEMO_CONFIG, passed with pulumi's
--config-file; `make down` uses it too), which receives the passphrase
provider's `encryptionsalt` and the validation run id instead of the tracked file."""
from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

STACK = "aggregation"
STACK_FILE = Path("stacks") / f"Pulumi.{STACK}.yaml"
DEMO_CONFIG = Path(".mirrorstack") / "demo" / f"Pulumi.{STACK}.yaml"  # the Makefile's `down` names it too
# librdkafka's own log lines (`%6|...|BGQUEUE|...` when a client closes) go through
# Python logging: warnings and errors are shown, its informational chatter is not.
KAFKA_LOG = logging.getLogger("demo.librdkafka")
TOPIC = "orders"
PER_SOURCE = 1000


def kafka_client(settings: dict) -> dict:
    return {**settings, "logger": KAFKA_LOG}


def prepare_stack() -> None:
    """Select (or create) the stack, and write DEMO_CONFIG from the tracked
    stack file. `pulumi stack init` has no --config-file: it writes a new
    stack's salt into the tracked file, which is moved to the copy."""
    tracked = STACK_FILE.read_text()
    try:
        subprocess.run(["pulumi", "stack", "select", "--create", STACK, "--non-interactive"], check=True)
    finally:
        created = STACK_FILE.read_text()
        if created != tracked:
            STACK_FILE.write_text(tracked)
    salt = _salt(tracked) or _salt(created) or (_salt(DEMO_CONFIG.read_text()) if DEMO_CONFIG.is_file() else None)
    DEMO_CONFIG.parent.mkdir(parents=True, exist_ok=True)
    text = tracked if _salt(tracked) or salt is None else f"{tracked.rstrip()}\nencryptionsalt: {salt}\n"
    DEMO_CONFIG.write_text(text)


def _salt(stack_file: str) -> str | None:
    for line in stack_file.splitlines():
        if line.startswith("encryptionsalt:"):
            return line.partition(":")[2].strip()
    return None


def pulumi(*args: str, capture: bool = False) -> str:
    cmd = ["pulumi", *args, "--stack", STACK, "--non-interactive"]
    print(f"$ {' '.join(cmd)}", flush=True)
    done = subprocess.run(cmd, text=True, stdout=subprocess.PIPE if capture else None)
    if done.returncode != 0:
        sys.exit(f"demo: `{' '.join(cmd)}` failed (exit {done.returncode})")
    return done.stdout or ""


def ensure_topic(bootstrap: str) -> None:
    admin = AdminClient(kafka_client({"bootstrap.servers": bootstrap}))
    if TOPIC not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1)])[TOPIC].result(30)


def send(bootstrap: str, region: str, run: str) -> set[bytes]:
    producer = Producer(kafka_client({"bootstrap.servers": bootstrap, "acks": "all"}))
    values = {f"{run} {region} order {i}".encode() for i in range(PER_SOURCE)}
    for value in values:
        producer.produce(TOPIC, key=region.encode(), value=value)
    producer.flush(60)
    return values


def watch(bootstrap: str, expected: set[bytes], timeout: float = 180) -> set[bytes]:
    consumer = Consumer(kafka_client({"bootstrap.servers": bootstrap, "group.id": f"demo-{uuid.uuid4().hex}",
                                      "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    consumer.subscribe([TOPIC])
    seen: set[bytes] = set()
    deadline, next_report = time.monotonic() + timeout, 0.0
    try:
        while not expected <= seen and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=1.0):
                if not msg.error() and msg.value() in expected:
                    seen.add(msg.value())
            if time.monotonic() >= next_report:
                print(f"  central/{TOPIC}: {len(seen)} of {len(expected)} records arrived", flush=True)
                next_report = time.monotonic() + 2
    finally:
        consumer.close()
    return seen


def validate(run: str) -> bool:
    """Re-run the stack's SparkValidationJob (a new run id) and show its report."""
    print("\nvalidating with Spark: the stack's validation job reconciles every record of both flows", flush=True)
    cmd = ["pulumi", "up", "--yes", "--skip-preview", "--stack", STACK, "--non-interactive",
           "--config-file", str(DEMO_CONFIG), "--config", f"mirrorstack:validationRunId={run}"]
    print(f"$ {' '.join(cmd)}", flush=True)
    up_ok = subprocess.run(cmd).returncode == 0
    report_file = Path(".mirrorstack") / STACK / "validation-job" / "report.json"
    if report_file.is_file():
        from mirrorstack.spark.report import summary_text  # the Makefile puts the checkout on PYTHONPATH
        print(f"\n{summary_text(json.loads(report_file.read_text()))}\n(full report: {report_file})")
    if up_ok:
        output = json.loads(pulumi("stack", "output", "validation", "--json", capture=True))
        print(f"\nstack output `validation`: {json.dumps(output, indent=2)}")
    return up_ok


def main() -> None:
    logging.basicConfig(format="%(name)s: %(message)s", level=logging.WARNING)
    prepare_stack()
    pulumi("up", "--yes", "--skip-preview", "--config-file", str(DEMO_CONFIG))
    outputs = json.loads(pulumi("stack", "output", "--json", capture=True))
    clusters = outputs["clusters"]
    run = uuid.uuid4().hex[:8]
    expected: set[bytes] = set()
    for region in ("us", "uk"):
        ensure_topic(clusters[region])
        expected |= send(clusters[region], region, run)
        print(f"sent {PER_SOURCE} records to {region}/{TOPIC} ({clusters[region]})")
    print(f"waiting for them in central/{TOPIC} ({clusters['central']}); MM2 picks up new topics within 10 s")
    arrived = watch(clusters["central"], expected)
    by_region = {r: sum(v.split()[1] == r.encode() for v in arrived) for r in ("us", "uk")}
    print(f"\narrived in central/{TOPIC}: {by_region} of {PER_SOURCE} each")
    print(f"\nconnector states: {json.dumps(outputs['flows'], indent=2)}")
    if arrived != expected:
        sys.exit(f"demo: {len(expected) - len(arrived)} records did not arrive")
    passed = validate(run)
    print("""
Next:
  . ./env.sh                                   # the engine, local state, passphrase
  pulumi stack output --stack aggregation      # bootstrap servers, Connect URL, states, validation
  pulumi preview --diff --stack aggregation    # after editing stacks/Pulumi.aggregation.yaml
                                               # (the demo ran with a copy: .mirrorstack/demo/)
  make down                                    # destroy the stack (stops every process)""")
    if not passed:
        sys.exit("demo: the validation did not pass (see its report above)")


if __name__ == "__main__":
    main()
