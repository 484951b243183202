"""Tools resolve to the pinned versions; a missing one names its make step."""
import re
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from mirrorstack import toolchain, versions

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def empty_tools(tmp_path, monkeypatch):
    monkeypatch.setenv("MIRRORSTACK_TOOLS_DIR", str(tmp_path))


@pytest.mark.parametrize("lookup, step", [
    (toolchain.kafka_libs, "make kafka"),
    (toolchain.jmx_agent_jar, "make jmx-exporter"),
    (toolchain.spark_kafka_jars, "make spark-kafka"),
])
def test_missing_jars_name_their_setup_step(empty_tools, lookup, step):
    with pytest.raises(toolchain.ToolMissing, match=re.escape(f"`{step}`")) as err:
        lookup()
    assert "make setup" in str(err.value)


@pytest.mark.parametrize("lookup", [toolchain.prometheus_binary, toolchain.promtool_binary])
def test_missing_prometheus_names_its_setup_step(monkeypatch, lookup):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("MIRRORSTACK_PROMETHEUS", raising=False)
    monkeypatch.delenv("MIRRORSTACK_PROMTOOL", raising=False)
    with pytest.raises(toolchain.ToolMissing, match=re.escape("`make prometheus`")):
        lookup()


def test_installed_kafka_is_the_pinned_version_with_connect_and_mirrormaker():
    libs = toolchain.kafka_libs()
    v = versions.kafka_version()
    for jar in (f"kafka_2.13-{v}.jar", f"kafka-tools-{v}.jar", f"connect-runtime-{v}.jar",
                f"connect-mirror-{v}.jar", f"kafka-clients-{v}.jar"):
        assert (libs / jar).is_file(), jar
    # one Kafka version only: no stray kafka-clients of another release
    assert [p.name for p in libs.glob("kafka-clients-*.jar")] == [f"kafka-clients-{v}.jar"]


def test_spark_kafka_jars_match_the_installed_pyspark_and_bring_their_deps():
    names = [p.name for p in toolchain.spark_kafka_jars()]
    spark = versions.spark_version()
    assert f"spark-sql-kafka-0-10_2.13-{spark}.jar" in names
    assert f"spark-token-provider-kafka-0-10_2.13-{spark}.jar" in names
    assert any(n.startswith("kafka-clients-") for n in names)
    assert any(n.startswith("commons-pool2-") for n in names)
    assert not any(n.startswith(("scala-library", "hadoop-client")) for n in names)  # pyspark has them


def test_jmx_agent_is_the_pinned_1x_release():
    jar = toolchain.jmx_agent_jar()
    assert jar.name == f"jmx_prometheus_javaagent-{versions.jmx_exporter_version()}.jar"
    assert versions.jmx_exporter_version().startswith("1.")


def test_each_version_is_pinned_once_and_the_makefile_reads_the_same_pins():
    out = subprocess.run(["make", "-s", "versions"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    make = dict(line.split("=", 1) for line in out.split())
    assert make == {
        "KAFKA_VERSION": versions.kafka_version(),
        "JMX_EXPORTER_VERSION": versions.jmx_exporter_version(),
        "SPARK_VERSION": versions.spark_version(),
        "PULUMI_VERSION": versions.pulumi_version(),
        "TOXIPROXY_VERSION": versions.toxiproxy_version(),
        "DEBIAN_SUITE": versions.debian_suite(),
        "DEBIAN_PROMETHEUS_VERSION": versions.debian_prometheus_version(),
        "DEBIAN_PROMETHEUS_CLIENT_VERSION": versions.debian_package_version("python3-prometheus-client"),
    }
    pins = dict(line.split("==") for line in (ROOT / "requirements.txt").read_text().split()
                if "==" in line)
    assert pins["pyspark"] == metadata.version("pyspark")
    assert pins["pulumi"] == metadata.version("pulumi")
    assert "4." in versions.kafka_version()[:2]


def test_prometheus_from_debian_answers():
    out = subprocess.run([toolchain.prometheus_binary(), "--version"], capture_output=True, text=True)
    assert "prometheus, version 2." in out.stdout + out.stderr


def test_toxiproxy_is_the_pinned_build_and_runs():
    binary = toolchain.toxiproxy_binary()
    assert binary.endswith(f"toxiproxy-server-{versions.toxiproxy_version()}")
    done = subprocess.run([binary, "-help"], capture_output=True, text=True, timeout=30)
    assert "-port" in done.stdout + done.stderr  # a real toxiproxy server binary, not a placeholder
