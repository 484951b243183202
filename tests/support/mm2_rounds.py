"""Waiting on what MirrorMaker 2 has done, instead of for a fixed time.

A MirrorSourceConnector looks for new topics every refresh.topics.interval.seconds
on its own scheduler thread, one round after another, and its worker logs each
finished round at INFO (Kafka's org.apache.kafka.connect.mirror.Scheduler:
"refreshing topics took <n> ms"). On the local platform each Connect worker logs
to <localDir>/connect-<name>-<i>/service.log, so the rounds a connector has done
can be counted in its worker's log."""
from __future__ import annotations

import time
from pathlib import Path

REFRESH_DONE = "INFO refreshing topics took "
# A flow's overrides for a test that loses its source: MM2's calls to the dead cluster give up after
# 10 s (MM2's admin.timeout.ms and Kafka's admin default: 60 s, which is how long stopping a connector
# whose source is lost takes, so an unplanned switch would wait a minute for each stop).
DEAD_SOURCE = {"admin.timeout.ms": "10000", "source.admin.default.api.timeout.ms": "10000",
               "source.admin.request.timeout.ms": "5000"}


def connect_logs(local_dir: str | Path) -> list[Path]:
    """The service logs of the stack's Connect workers."""
    return sorted(Path(local_dir).glob("connect-*/service.log"))


def refresh_rounds(log: Path) -> int:
    """Topic refresh rounds finished so far by the MirrorSourceConnectors of this worker."""
    try:
        with open(log, errors="replace") as lines:
            return sum(REFRESH_DONE in line for line in lines)
    except FileNotFoundError:
        return 0


def refresh_marks(local_dir: str | Path) -> dict[Path, int]:
    """{worker log: rounds finished so far}, to wait from (see wait_for_refresh_rounds)."""
    logs = connect_logs(local_dir)
    assert logs, f"no Connect worker log under {local_dir}"
    return {log: refresh_rounds(log) for log in logs}


def wait_for_refresh_rounds(marks: dict[Path, int], rounds: int, timeout: float = 120.0,
                            logs: list[Path] | None = None) -> None:
    """Until each worker in `marks` (or only `logs` of them) has finished `rounds`
    whole topic refresh rounds that began after its mark was taken: a round in
    progress at the mark may have begun before it, so that one does not count
    (rounds of one connector never overlap)."""
    wanted = {log: marks[log] + 1 + rounds for log in (logs or marks)}
    deadline = time.monotonic() + timeout
    while True:
        seen = {log: refresh_rounds(log) for log in wanted}
        if all(seen[log] >= n for log, n in wanted.items()):
            return
        assert time.monotonic() < deadline, (
            f"MM2 did not finish {rounds} topic refresh round(s) within {timeout:.0f}s: "
            + ", ".join(f"{log.parent.name} {seen[log] - marks[log]} of {n - marks[log]}" for log, n in wanted.items()))
        time.sleep(0.5)
