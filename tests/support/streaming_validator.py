"""The continuous validation (mirrorstack.spark.streaming) as a process, as a platform starts it,
its figures read from its /metrics as Prometheus reads them."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import requests
from prometheus_client.parser import text_string_to_metric_families

from mirrorstack import toolchain
from mirrorstack.monitoring.metrics import DELIVERY_CONFIRMED, DELIVERY_EXTRAS, DELIVERY_MISSING
from mirrorstack.platforms.containers import PYTHON_SERVICE_PORT
from tests.support.ports import free_ports

# Prints the validator's /metrics, run inside its container or pod (python3 is in the spark image).
READ_METRICS_INSIDE = ["python3", "-c", "import urllib.request; print(urllib.request.urlopen("
                       f"'http://127.0.0.1:{PYTHON_SERVICE_PORT}/metrics', timeout=5).read().decode())"]


def delivery_totals(text: str) -> dict[str, float]:
    """Confirmed, missing and extra records over every flow and topic, from a /metrics text."""
    found = {DELIVERY_CONFIRMED: 0.0, DELIVERY_MISSING: 0.0, DELIVERY_EXTRAS: 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in found:
                found[sample.name] += sample.value
    return found


class StreamingValidator:
    """On local[2], or on `master` (`more`: its other arguments, `env`: its environment's changes);
    `flows`: its flows JSON; its figures those of the target topic `topic`."""

    def __init__(self, folder: Path, flows: dict, topic: str, *, window: float, trigger: float,
                 master: str | None = None, more: tuple[str, ...] = (), env: dict[str, str] | None = None):
        self.folder, self.topic, self.env = folder, topic, env or {}
        self.port = free_ports(1)[0]
        self.config = folder / "flows.json"
        self.config.write_text(json.dumps(flows))
        self.argv = [sys.executable, "-m", "mirrorstack.spark.streaming", "--config", str(self.config),
                     "--checkpoint-dir", str(folder / "checkpoint"), "--metrics-port", str(self.port),
                     "--window-seconds", str(window), "--trigger-seconds", str(trigger), *more]
        if master and master.startswith("sc://"):  # the server has the Kafka source; no JVM here
            self.argv += ["--master", master]
        else:
            self.argv += ["--jars", ",".join(str(j) for j in toolchain.spark_kafka_jars()),
                          *([f"--java-options={toolchain.spark_archive_option()}"]
                            if toolchain.spark_archive_option() else []),
                          *(["--master", master] if master else [])]
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        self.log = self.folder / f"validator-{self.starts}.log"
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=open(self.log, "w"),
                                     env={**os.environ, "PYSPARK_PYTHON": sys.executable, **self.env})

    def stop(self) -> int | None:
        """TERM, as a pod's or container's stop sends: its exit code."""
        proc, self.proc = self.proc, None
        if proc and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode if proc else None

    def said(self) -> str:
        return self.log.read_text(errors="replace")

    def figures(self) -> dict[str, float]:
        """name (with the histogram's _sum and _count) -> value, for the target topic."""
        assert self.proc and self.proc.poll() is None, f"the validator ended:\n{self.said()[-3000:]}"
        try:
            text = requests.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text
        except requests.ConnectionError:
            return {}
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.labels.get("topic", self.topic) == self.topic and "le" not in sample.labels:
                    out[sample.name.removeprefix("mirrorstack_continuous_")] = sample.value
        return out

    def until(self, what: str, check, timeout: float = 120) -> dict[str, float]:
        """The figures once `check(figures)` holds; a figure not exported yet is -1."""
        deadline = time.monotonic() + timeout
        while True:
            figures = self.figures()
            if figures and check(defaultdict(lambda: -1, figures)):
                return figures
            assert time.monotonic() < deadline, f"{what}: not within {timeout}s: {figures}\n{self.said()[-3000:]}"
            time.sleep(0.5)
