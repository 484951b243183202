"""Where the installed tools live, and a clear error when one is missing.

`make setup` installs everything under ``.tools/`` (or $MIRRORSTACK_TOOLS_DIR).
Every lookup here fails with ToolMissing naming the make step that installs
the missing piece, so a test never skips for lack of a tool: it fails and says
what to run.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from mirrorstack import versions

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class ToolMissing(RuntimeError):
    def __init__(self, what: str, where: str, step: str):
        super().__init__(
            f"{what} not found ({where}). Run `make setup` "
            f"(the step that installs it: `make {step}`)."
        )
        self.step = step


def tools_dir() -> Path:
    return Path(os.environ.get("MIRRORSTACK_TOOLS_DIR", PROJECT_ROOT / ".tools")).resolve()


def kafka_libs() -> Path:
    """Folder of the Kafka broker + tools + Connect + MirrorMaker 2 jars."""
    libs = tools_dir() / "kafka" / "libs"
    marker = libs / f"kafka_2.13-{versions.kafka_version()}.jar"
    if not marker.is_file():
        raise ToolMissing(f"Kafka {versions.kafka_version()} jars", str(marker), "kafka")
    return libs


def kafka_classpath() -> str:
    return str(kafka_libs() / "*")


def class_archives_dir() -> Path:
    """Where `make class-archives` puts the broker's and Connect's class-data
    archives (tools/class_archives.py): beside the jars they were made from."""
    return tools_dir() / "class-archives"


def class_archive(name: str) -> Path | None:
    """The class-data archive `name` (`broker`: the broker's and Kafka's tools',
    `connect`: Connect's), if `make class-archives` made one."""
    archive = class_archives_dir() / f"{name}.jsa"
    return archive if archive.is_file() else None


def spark_class_archive() -> Path | None:
    """The local validation job's driver class-data archive, if `make
    class-archives` made one (valid for the venv's pyspark jars it was made from;
    the JVM starts without it otherwise)."""
    archive = class_archives_dir() / "spark-driver.jsa"
    return archive if archive.is_file() else None


def spark_archive_option() -> str | None:
    """The Spark driver's JVM option that maps spark_class_archive(), if there is one."""
    archive = spark_class_archive()
    return f"-XX:SharedArchiveFile={archive}" if archive else None


def jmx_agent_jar() -> Path:
    version = versions.jmx_exporter_version()
    jar = tools_dir() / "jmx" / f"jmx_prometheus_javaagent-{version}.jar"
    if not jar.is_file():
        raise ToolMissing(f"JMX exporter agent {version}", str(jar), "jmx-exporter")
    return jar


def spark_kafka_jars() -> list[Path]:
    """spark-sql-kafka and its Kafka client deps, for `spark.jars`."""
    folder = tools_dir() / "spark-kafka"
    version = versions.spark_version()
    marker = folder / f"spark-sql-kafka-0-10_2.13-{version}.jar"
    if not marker.is_file():
        raise ToolMissing(f"spark-sql-kafka {version} jars", str(marker), "spark-kafka")
    return sorted(folder.glob("*.jar"))


def pulumi_binary() -> str:
    """The Pulumi CLI of the pinned SDK's version, with the Python language host
    and its scripts beside it (all built by `make engine`)."""
    import subprocess

    bin_dir = tools_dir() / "bin"
    for name in ("pulumi", "pulumi-language-python", "pulumi-language-python-exec",
                 "pulumi-resource-pulumi-python"):
        if not os.access(bin_dir / name, os.X_OK):
            raise ToolMissing(f"Pulumi engine piece `{name}`", str(bin_dir / name), "engine")
    cli = str(bin_dir / "pulumi")
    found = subprocess.run([cli, "version"], capture_output=True, text=True,
                           env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"}).stdout.strip()
    wanted = f"v{versions.pulumi_version()}"
    if found != wanted:
        raise ToolMissing(f"Pulumi CLI {wanted} (found {found or 'nothing'})", cli, "engine")
    return cli


def toxiproxy_binary() -> str:
    """The latency-injecting TCP proxy the benchmarks put between data centres."""
    version = versions.toxiproxy_version()
    binary = tools_dir() / "bin" / f"toxiproxy-server-{version}"
    if not os.access(binary, os.X_OK):
        raise ToolMissing(f"Toxiproxy {version}", str(binary), "toxiproxy")
    return str(binary)


def _binary(name: str, step: str, env_var: str) -> str:
    found = os.environ.get(env_var) or shutil.which(name)
    if not found or not os.access(found, os.X_OK):
        raise ToolMissing(f"`{name}`", f"${env_var} or PATH", step)
    return found


def prometheus_binary() -> str:
    return _binary("prometheus", "prometheus", "MIRRORSTACK_PROMETHEUS")


def promtool_binary() -> str:
    return _binary("promtool", "prometheus", "MIRRORSTACK_PROMTOOL")


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(Path(java_home, "bin", "java"), os.X_OK):
        return str(Path(java_home, "bin", "java"))
    return _binary("java", "preflight", "MIRRORSTACK_JAVA")
