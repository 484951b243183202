"""When the Kafka nodes of a local stack were (re)started and ready, from
/proc and their logs: to tell a rolling restart from one of everything at once."""
from __future__ import annotations

import datetime
import os
import re
from pathlib import Path

STARTED = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO \[KafkaRaftServer nodeId=\d+\] Kafka Server started",
                     re.M)


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise RuntimeError("no btime in /proc/stat")


def kafka_node(local: Path, service: str) -> tuple[int, float]:
    """(pid, start time as a Unix time) of the node's running broker/controller JVM."""
    config = f"{local}/{service}/server.properties"
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        if b"kafka.Kafka" in args and config.encode() in args:
            ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22: start time in clock ticks since boot
            return int(proc.name), _boot_time() + ticks / os.sysconf("SC_CLK_TCK")
    raise AssertionError(f"no running JVM of {service} under {local}")


def ready_at(local: Path, service: str) -> float:
    """When the node last logged that it started (the log is appended across restarts)."""
    stamps = STARTED.findall((local / service / "service.log").read_text(errors="ignore"))
    assert stamps, f"{service} never logged 'Kafka Server started'"
    # Kafka logs the JVM's local time, the host's time zone: a naive datetime's timestamp() reads it the same way
    return datetime.datetime.strptime(stamps[-1], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def overlapping_restarts(local: Path, services: list[str]) -> list[tuple[str, str]]:
    """Pairs of `services` that were starting at the same time: one's JVM
    started before the other (started earlier) was ready. [] = one at a time."""
    windows = sorted((kafka_node(local, s)[1], ready_at(local, s), s) for s in services)
    return [(a, b) for (_, a_ready, a), (b_start, _, b) in zip(windows, windows[1:]) if b_start < a_ready]
