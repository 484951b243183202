"""Real Spark servers on 127.0.0.1, started from the pinned PySpark's own jars
(its `jars/`, as SPARK_HOME), each a process of ours stopped by its own PID: a
standalone cluster (a master and its workers) and a Spark Connect server."""
from __future__ import annotations

from pathlib import Path

import requests

from mirrorstack import toolchain
from mirrorstack.platforms.local import launcher
from mirrorstack.spark.masters import master_answers
from tests.support.ports import free_ports

HOST = "127.0.0.1"
MASTER_MAIN = "org.apache.spark.deploy.master.Master"
WORKER_MAIN = "org.apache.spark.deploy.worker.Worker"
DAEMON_HEAP = "256m"  # the master's and each worker's own JVM; executors are sized by the application


def spark_home() -> Path:
    import pyspark
    return Path(pyspark.__file__).resolve().parent


def scala_version() -> str:
    """The Scala version PySpark's jars are built for (spark-core_2.13-4.2.0.jar: 2.13)."""
    (core,) = spark_home().glob("jars/spark-core_*.jar")
    return core.name.split("_", 1)[1].split("-", 1)[0]


def spark_env() -> dict[str, str]:
    import os
    import sys
    # SPARK_HOME: where a worker finds the jars its executors start with; the executors'
    # Python is this one (the job's package ships on --py-files, its dependencies are here).
    # SPARK_SCALA_VERSION: what a distribution's launch scripts set; without it a worker's
    # launcher looks for a source build and starts no executor ("Cannot find any build directories").
    # JAVA_HOME: the Java the launch scripts start (the toolchain's).
    java_home = Path(toolchain.java_binary()).resolve().parent.parent
    return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": HOST, "JAVA_HOME": str(java_home),
            "SPARK_SCALA_VERSION": scala_version(), "PYSPARK_PYTHON": sys.executable}


class StandaloneCluster:
    """`workers` workers of `cores` cores and `memory` each (what executors may take)."""

    def __init__(self, base_dir: Path, workers: int = 2, *, cores: int = 1, memory: str = "1g"):
        self.base_dir = Path(base_dir)
        self.workers, self.cores, self.memory = workers, cores, memory
        self.port, self.ui_port, *self.worker_ui_ports = free_ports(2 + workers)
        self.handles: list[launcher.ProcessHandle] = []

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://{HOST}:{self.ui_port}"

    def _command(self, main: str, args: list[str]) -> list[str]:
        home = spark_home()
        return [toolchain.java_binary(), f"-Xmx{DAEMON_HEAP}", "-cp", f"{home}/jars/*", main, *args]

    def _env(self) -> dict[str, str]:
        return spark_env()

    def alive_workers(self) -> list[dict]:
        state = requests.get(f"{self.ui_url}/json/", timeout=5).json()
        return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]

    def start(self, timeout: float = 120.0) -> StandaloneCluster:
        master = launcher.start("spark-master", self._command(MASTER_MAIN, [
            "--host", HOST, "--port", str(self.port), "--webui-port", str(self.ui_port)]),
            log_file=self.base_dir / "master.log", env=self._env())
        self.handles.append(master)
        for i, ui_port in enumerate(self.worker_ui_ports):
            self.handles.append(launcher.start(f"spark-worker-{i}", self._command(WORKER_MAIN, [
                "--host", HOST, "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(ui_port),
                "--work-dir", str(self.base_dir / f"worker-{i}"), self.master_url]),
                log_file=self.base_dir / f"worker-{i}.log", env=self._env()))
        launcher.wait_until_healthy(master, lambda: len(self.alive_workers()) == self.workers, timeout=timeout,
                                    what=f"Spark master {self.master_url} with {self.workers} workers")
        return self

    def applications(self) -> list[dict]:
        """The applications the master ran or runs, with their executors' counts."""
        state = requests.get(f"{self.ui_url}/json/", timeout=5).json()
        return [*state.get("activeapps", []), *state.get("completedapps", [])]

    def stop(self) -> None:
        for handle in reversed(self.handles):  # workers first: each stops its executors
            launcher.stop(handle)
        self.handles.clear()


CONNECT_SERVER_MAIN = "org.apache.spark.sql.connect.service.SparkConnectServer"


class ConnectServer:
    """A Spark Connect server (Spark 4's remote protocol) running `local[cores]` in its own JVM, with
    `jars` on its classpath (none: a server without the Kafka data source)."""

    def __init__(self, base_dir: Path, *, jars: list[Path] = (), cores: int = 2, memory: str = "1g"):
        self.base_dir = Path(base_dir)
        self.jars, self.cores, self.memory = list(jars), cores, memory
        (self.port,) = free_ports(1)
        self.handle: launcher.ProcessHandle | None = None

    @property
    def url(self) -> str:
        return f"sc://{HOST}:{self.port}"

    def start(self, timeout: float = 120.0) -> ConnectServer:
        # spark-submit (not plain java): its launcher adds the JVM module options Arrow needs on Java 17,
        # and it exec's the server's JVM, so the PID is the server's.
        argv = [str(spark_home() / "bin" / "spark-submit"), "--master", f"local[{self.cores}]",
                "--driver-memory", self.memory, "--class", CONNECT_SERVER_MAIN,
                *(["--jars", ",".join(map(str, self.jars))] if self.jars else []),
                "--conf", f"spark.connect.grpc.binding.address={HOST}",
                "--conf", f"spark.connect.grpc.binding.port={self.port}",
                "--conf", "spark.ui.enabled=false", "spark-internal"]
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.handle = launcher.start(f"spark-connect-{self.port}", argv, log_file=self.base_dir / "server.log",
                                     env=spark_env())
        # the job's own check (it raises until the server answers)
        launcher.wait_until_healthy(self.handle, lambda: master_answers(self.url) is None, timeout=timeout,
                                    what=f"Spark Connect server {self.url}")
        return self

    def stop(self) -> None:
        if self.handle is not None:
            launcher.stop(self.handle)
            self.handle = None
