"""`make class-archives`: application class-data archives (AppCDS) for the Kafka
broker and Connect worker JVMs that the local platform starts.

A JVM started with `-XX:SharedArchiveFile=<archive>` maps the classes it would
otherwise load, parse and verify from Kafka's jars. Measured on the 2-core
machine (a KRaft node until its listener answers, three runs each): 3.8-4.3 CPU
seconds and 2.4-2.7 s without, 2.1-2.3 CPU seconds and 1.3-1.4 s with. The
suite starts several hundred such JVMs.

Each archive is dumped at the exit of a JVM that did the service's start-up
work (`-XX:ArchiveClassesAtExit`): a broker until it serves, a Connect worker
until it runs MirrorMaker 2 connectors. An archive is valid only for the jars
it was made from (the JVM checks their paths, sizes and times, and silently
runs without it otherwise), so it is made per install of `.tools/kafka`, next
to it, and the launcher uses it only when it exists (components/platforms/
local/launcher.py).

The local validation job's Spark driver gets one too (`spark-driver.jsa`, made
from a real validation run against the same Kafka node): a short validation's
driver spent about a third of its CPU loading Spark's classes (a small job, 3
runs each: 21-23 CPU seconds without, 14-15 with). The local job passes it as
the driver's `-XX:SharedArchiveFile` (components/platforms/local/spark_job.py).
"""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from mirrorstack import toolchain
from mirrorstack.platforms import jvm

KEEP_LOGS = 40  # lines of a failed JVM's output shown


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, ready, process: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-KEEP_LOGS:])
            raise SystemExit(f"class-archives: {what} did not come up (see {log}):\n{tail}")
        time.sleep(0.2)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _rest(url: str, body: dict | None = None):
    request = urllib.request.Request(url, data=json.dumps(body).encode() if body else None,
                                     headers={"Content-Type": "application/json"}, method="POST" if body else "GET")
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read() or b"null")


def _answers(url: str) -> bool:
    try:
        _rest(url)
        return True
    except OSError:
        return False


def _running(url: str, names: list[str]) -> bool:
    try:
        states = [_rest(f"{url}/connectors/{name}/status") for name in names]
    except OSError:
        return False
    return all(s["connector"]["state"] == "RUNNING" and s["tasks"] and
               all(t["state"] == "RUNNING" for t in s["tasks"]) for s in states)


def _start(main: str, args: list[str], archive: Path, log: Path) -> subprocess.Popen:
    archive.unlink(missing_ok=True)  # the JVM writes it read-only
    argv = jvm.java_command(toolchain.java_binary(), main, args, classpath=toolchain.kafka_classpath(), heap="512m")
    argv.insert(1, f"-XX:ArchiveClassesAtExit={archive}")
    return subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)


def _stop(process: subprocess.Popen, archive: Path, what: str) -> None:
    process.terminate()  # an orderly exit: the archive is written as the JVM exits
    process.wait(120)
    if not archive.is_file():
        raise SystemExit(f"class-archives: {what} exited ({process.returncode}) without writing {archive}")


SPARK_ARCHIVE = "spark-driver.jsa"
SPARK_RECORDS = 200  # enough for every stage of the job to run; its classes, not its speed, are recorded


def _spark_archive(bootstrap: str, archive: Path, work: Path) -> None:
    """Run the validation job once, as the local platform does, its driver
    writing the classes it loaded to `archive` at exit."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": bootstrap})  # kept until the future resolves
    client.create_topics([NewTopic("cds", num_partitions=2, replication_factor=1)])["cds"].result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(SPARK_RECORDS):
        producer.produce("cds", key=str(i).encode(), value=b"v" * 100)
    producer.flush(60)
    flows = {"flows": [{"name": "cds", "source_bootstrap": bootstrap, "target_bootstrap": bootstrap,
                        "policy": "identity", "topics": ["cds"]}], "wait_seconds": 5}
    archive.unlink(missing_ok=True)
    job = toolchain.PROJECT_ROOT / "spark" / "validate_replication.py"
    argv = [sys.executable, str(job), "--config-json", json.dumps(flows), "--offsets-via", "spark",
            "--jars", ",".join(str(j) for j in toolchain.spark_kafka_jars()), "--poll-seconds", "1",
            f"--java-options=-XX:ArchiveClassesAtExit={archive}", "--quiet"]
    done = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not archive.is_file():
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-KEEP_LOGS:])
        raise SystemExit(f"class-archives: the validation job exited {done.returncode} without writing "
                         f"{archive}:\n{tail}")


def build(folder: Path) -> None:
    started = time.monotonic()
    folder.mkdir(parents=True, exist_ok=True)
    broker_archive, connect_archive = folder / "broker.jsa", folder / "connect.jsa"
    spark_archive = folder / SPARK_ARCHIVE
    with tempfile.TemporaryDirectory(prefix="mirrorstack-cds-") as tmp:
        work = Path(tmp)
        port, controller, rest = _free_port(), _free_port(), _free_port()
        (work / "server.properties").write_text("\n".join([
            "process.roles=broker,controller", "node.id=1", f"controller.quorum.voters=1@127.0.0.1:{controller}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
            "controller.listener.names=CONTROLLER", f"log.dirs={work / 'data'}",
            "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1", ""]))
        subprocess.run(jvm.java_command(toolchain.java_binary(), jvm.STORAGE_TOOL_MAIN,
                                        ["format", "-t", "bWlycm9yc3RhY2stY2RzAA", "-c", str(work / "server.properties")],
                                        classpath=toolchain.kafka_classpath(), heap="256m", short_lived=True),
                       check=True, capture_output=True)
        print("class-archives: a Kafka node and a Connect worker start once to record their classes", flush=True)
        broker = _start(jvm.BROKER_MAIN, [str(work / "server.properties")], broker_archive, work / "broker.log")
        try:
            _wait("the Kafka node", lambda: _listening(port), broker, work / "broker.log")
            (work / "connect.properties").write_text("\n".join([
                f"bootstrap.servers=127.0.0.1:{port}", "group.id=mirrorstack-cds", f"listeners=http://127.0.0.1:{rest}",
                *(f"{kind}.storage.topic=mirrorstack-cds-{kind}s" for kind in ("config", "offset", "status")),
                *(f"{kind}.storage.replication.factor=1" for kind in ("config", "offset", "status")),
                "key.converter=org.apache.kafka.connect.converters.ByteArrayConverter",
                "value.converter=org.apache.kafka.connect.converters.ByteArrayConverter",
                "plugin.discovery=service_load", "scheduled.rebalance.max.delay.ms=0", ""]))
            worker = _start(jvm.CONNECT_DISTRIBUTED_MAIN, [str(work / "connect.properties")], connect_archive,
                            work / "connect.log")
            try:
                url = f"http://127.0.0.1:{rest}"
                _wait("the Connect worker", lambda: _answers(f"{url}/connectors"), worker, work / "connect.log")
                # MirrorMaker 2's connectors and a task that produces: their classes too
                common = {"source.cluster.alias": "a", "target.cluster.alias": "b",
                          "source.cluster.bootstrap.servers": f"127.0.0.1:{port}",
                          "target.cluster.bootstrap.servers": f"127.0.0.1:{port}",
                          "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
                          "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"}
                names = []
                for kind in ("MirrorHeartbeatConnector", "MirrorSourceConnector"):
                    names.append(kind)
                    _rest(f"{url}/connectors", {"name": kind, "config": {
                        **common, "connector.class": f"org.apache.kafka.connect.mirror.{kind}",
                        "topics": "mirrorstack-cds-none", "emit.heartbeats.interval.seconds": "1"}})
                _wait("MirrorMaker 2's connectors", lambda: _running(url, names[:1]), worker, work / "connect.log")
                print("class-archives: the validation job runs once to record Spark's classes", flush=True)
                _spark_archive(f"127.0.0.1:{port}", spark_archive, work)
            finally:
                _stop(worker, connect_archive, "the Connect worker")
        finally:
            _stop(broker, broker_archive, "the Kafka node")
    sizes = ", ".join(f"{a.name} {a.stat().st_size / 2**20:.0f} MiB" for a in (broker_archive, connect_archive, spark_archive))
    print(f"class-archives: {sizes} in {folder}, {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else toolchain.class_archives_dir())
