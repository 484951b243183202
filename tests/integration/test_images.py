"""The mirrorstack/* images on a real engine: each honours the image contract of
components/platforms/containers.py, and the private engine stops only when we started it.

One short-lived container per image, on a user-defined network as the docker
platform runs them (the private engine has no default bridge).
"""
from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mirrorstack import toolchain, versions
from mirrorstack.connect.supervision import SHIPS
from mirrorstack.validation.job_config import SPARK_HOME_IN_IMAGE
from mirrorstack.shipping import module_sources
from mirrorstack.platforms.containers import (IMAGE_DATA_DIR, IMAGE_KAFKA_LIBS, IMAGE_KAFKA_UID, IMAGE_SPARK_JARS,
                                             IMAGE_SPARK_UID, image_jmx_agent, image_spark_jars)
from tools import docker_engine
from tools.docker_engine import answering, ensure_engine, stop_engine
from tools.images import INPUTS_LABEL, build_images


def test_the_engine_stops_only_when_this_process_started_it():
    urls = [docker_engine.STANDARD_URL, docker_engine.PRIVATE_URL]
    none_answered = not os.environ.get("DOCKER_HOST") and not any(answering(url) for url in urls)
    engine = ensure_engine()
    assert engine.started == none_answered  # started one only when none answered
    again = ensure_engine()  # answers now: reused, not ours to stop
    assert (again.base_url, again.started) == (engine.base_url, False)
    stop_engine(again)
    assert answering(engine.base_url) is not None
    if not engine.started:  # someone else's engine (the standard socket, DOCKER_HOST): left running
        stop_engine(engine)
        assert answering(engine.base_url) is not None
        return
    pid = docker_engine.running_pid()
    assert pid is not None
    stop_engine(engine)
    assert not docker_engine.alive(pid)
    assert docker_engine.running_pid() is None and answering(docker_engine.PRIVATE_URL) is None


@pytest.fixture(scope="module")
def engine():
    engine = ensure_engine()
    network = None
    try:
        build_images(engine.client, log=lambda line: None)  # seconds when `make images` ran
        network = engine.client.networks.create(f"mirrorstack-test-images-{os.getpid()}", driver="bridge")
        yield engine.client, network.name
    finally:
        if network is not None:
            network.remove()
        stop_engine(engine)


@pytest.fixture
def client(engine):
    return engine[0]


def _run(engine, image: str, script: str) -> str:
    """stdout + stderr of `bash -c script` in a fresh container of `image` (its own user)."""
    client, network = engine
    output = client.containers.run(image, ["-c", script], entrypoint=["bash"], network=network,
                                   stdout=True, stderr=True, remove=True)
    return output.decode()


def _unpack(files: dict[str, bytes], folder: str) -> str:
    """A shell line writing `files` (relative path → bytes) under `folder` of a container."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for path, content in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(content), 0o644
            tar.addfile(info, io.BytesIO(content))
    return f"mkdir -p {folder} && echo {base64.b64encode(data.getvalue()).decode()} | base64 -d | tar -xz -C {folder}"


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_second_build_finds_every_image_up_to_date(client):
    outcome = build_images(client, log=lambda line: None)
    assert outcome == {versions.mirrorstack_image(key): "up to date" for key in versions.MIRRORSTACK_IMAGES}
    for key in versions.MIRRORSTACK_IMAGES:
        assert re.fullmatch("[0-9a-f]{64}", client.images.get(versions.mirrorstack_image(key)).labels[INPUTS_LABEL])


def test_kafka_image(engine):
    version = versions.kafka_version()
    agent = image_jmx_agent()
    out = _run(engine, versions.mirrorstack_image("kafka"), f"""
        echo "uid=$(id -u) home=$HOME pwd=$(pwd) data_owner=$(stat -c %u {IMAGE_DATA_DIR})"
        touch {IMAGE_DATA_DIR}/written && echo data-writable
        ls {IMAGE_KAFKA_LIBS}
        echo "agent=$(sha256sum {agent} | cut -d' ' -f1)"
        java -version 2>&1
        java -cp '{IMAGE_KAFKA_LIBS}/*' kafka.Kafka --version 2>&1""")
    assert f"uid={IMAGE_KAFKA_UID} home=/home/appuser pwd=/home/appuser data_owner={IMAGE_KAFKA_UID}" in out
    assert "data-writable" in out
    assert re.search(r'openjdk version "17\.', out), out
    jars = set(re.findall(r"^\S+\.jar$", out, re.M))
    assert jars == {jar.name for jar in toolchain.kafka_libs().glob("*.jar")}
    assert f"kafka_2.13-{version}.jar" in jars
    assert f"agent={_sha256(toolchain.jmx_agent_jar())}" in out
    assert re.search(rf"^{re.escape(version)}\b", out, re.M), out  # the jars run on the image's JRE


# A PySpark job as the validation job runs (spark-submit, Python workers, the image's
# spark-sql-kafka jars): Kafka's source resolves (lazily: no broker is contacted).
SPARK_JOB = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
print("squares", spark.sparkContext.parallelize(range(5), 2).map(lambda x: x * x).sum())
frame = spark.read.format("kafka").option("kafka.bootstrap.servers", "nowhere:9092").option("subscribe", "t").load()
print("kafka columns", ",".join(frame.columns))
spark.stop()
"""


# The supervisor's /metrics text of a made-up state (mirrorstack.connect.supervisor's registry).
SUPERVISOR_EXPOSITION = """
import prometheus_client
from mirrorstack.connect import healing, supervisor
state = healing.Supervision("central", {"a->b.MirrorSourceConnector": "running", 'a->b.Mirror"X': "paused"},
                            healing.Schedule())
state.of("a->b.MirrorSourceConnector").capped, state.checks, state.last_check = True, 3, 1764326400.25
print(prometheus_client.generate_latest(supervisor.registry(state)).decode(), end="")
"""


def test_spark_image(engine):
    version = versions.spark_version()
    out = _run(engine, versions.mirrorstack_image("spark"), f"""
        echo "uid=$(id -u) home=$HOME"
        touch $HOME/.ivy2/written && touch written && echo home-and-workdir-writable
        ls {IMAGE_SPARK_JARS}
        python3 -c 'import pyspark; print("pyspark", pyspark.__version__)'
        python3 -c 'import confluent_kafka, urllib3; print("switch clients", confluent_kafka.version()[0], urllib3.__version__)'
        python3 -c 'import importlib.metadata as m; print("prometheus_client", m.version("prometheus_client"))'
        {_unpack(module_sources(SHIPS), "/tmp/code")}
        cat > exposition.py <<'EOF'{SUPERVISOR_EXPOSITION}EOF
        echo "--- exposition"; PYTHONPATH=/tmp/code python3 -B exposition.py 2>&1; echo "--- end"
        {SPARK_HOME_IN_IMAGE}/bin/spark-submit --version 2>&1
        cat > job.py <<'EOF'{SPARK_JOB}EOF
        {SPARK_HOME_IN_IMAGE}/bin/spark-submit --master 'local[1]' --conf spark.ui.enabled=false \\
          --jars {",".join(image_spark_jars())} job.py 2>&1""")
    assert "squares 30" in out, out[-3000:]
    assert "kafka columns key,value,topic,partition,offset,timestamp,timestampType" in out, out[-3000:]
    assert f"uid={IMAGE_SPARK_UID} home=/home/spark" in out
    assert "home-and-workdir-writable" in out
    assert set(re.findall(r"^\S+\.jar$", out, re.M)) == {path.rsplit("/", 1)[1] for path in image_spark_jars()}
    assert f"pyspark {version}" in out
    # the failover switch's pod (components/failover/kube_job.py): the .venv's Kafka client and urllib3
    import confluent_kafka
    import urllib3
    assert f"switch clients {confluent_kafka.version()[0]} {urllib3.__version__}" in out, out[-3000:]
    assert re.search(rf"version {re.escape(version)}\b", out), out  # spark-submit's banner
    # the Connect supervisor's container: Debian's prometheus_client, the pinned one, and the supervisor's
    # shipped source serves with it the same families, types, HELP texts and samples as with the .venv's
    assert f"prometheus_client {versions.debian_package_version('python3-prometheus-client')}\n" in out, out[-3000:]
    in_image = out.split("--- exposition\n", 1)[1].split("--- end\n", 1)[0]
    here = subprocess.run([sys.executable, "-B", "-c", SUPERVISOR_EXPOSITION], capture_output=True, text=True,
                          check=True).stdout

    def families(text: str) -> list:
        return [(f.name, f.type, f.documentation, f.samples) for f in text_string_to_metric_families(text)]
    assert families(in_image) == families(here) and len(families(here)) == 8, in_image


def test_prometheus_image(engine):
    client, network = engine
    image = versions.mirrorstack_image("prometheus")
    tag = image.rpartition(":")[2]
    # The entrypoint with the flags the docker platform passes: the TSDB in /prometheus must open.
    container = client.containers.run(image, ["--config.file=/etc/prometheus/prometheus.yml",
                                              "--storage.tsdb.path=/prometheus"], network=network, detach=True)
    try:
        deadline = time.monotonic() + 60
        while b"Server is ready to receive web requests" not in container.logs() and time.monotonic() < deadline:
            container.reload()
            assert container.status == "running", container.logs().decode()[-2000:]
            time.sleep(0.5)
        assert b"Server is ready to receive web requests" in container.logs(), container.logs().decode()[-2000:]
        code, out = container.exec_run(["sh", "-c", "id -u; ls /prometheus; prometheus --version 2>&1"])
        assert code == 0, out
        text = out.decode()
        assert text.splitlines()[0] == "65534"
        assert "wal" in text.split()  # written by the image's user
        assert f"prometheus, version {tag}" in text
    finally:
        container.remove(force=True)
