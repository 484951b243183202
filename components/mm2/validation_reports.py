"""The validation job's report as a record: the channel by which it reaches the
control plane wherever the job ran (a process of `up`, a pod, a cluster, a
managed service). One topic on the validated flows' first target; key: the
run's key; value: the report's JSON, trimmed to fit a record. Where the
platform runs the job in its own network (docker, kubernetes), whose Kafka
addresses do not resolve where `up` runs, the job also prints the report on one
marked line of its output (`printed_line`), which the platform reads.

Shared by the job (which writes it) and the control plane (which reads it and
grants the rights to). Standard library only."""
from __future__ import annotations

import json
from typing import Any

# `.internal`: MM2 replicates no such topic by default, and the job validates none.
REPORT_TOPIC = "mirrorstack-validation-reports.internal"
# Below Kafka's default record limit (1 MiB) with room for the batch's own bytes.
MAX_REPORT_BYTES = 900_000
# The printed line: small enough for any log pipeline to keep whole (container runtimes split at 16 KiB).
PRINTED_MARK = "mirrorstack-validation-report: "
MAX_PRINTED_BYTES = 15_000
# What a report loses first when it does not fit (each group's, largest first): it keeps its counts.
TRIMMABLE = ("lag", "samples", "failover", "purged_partitions", "sources")


def report_value(report: dict[str, Any], max_bytes: int = MAX_REPORT_BYTES) -> bytes:
    """The record's value: the report as JSON, or, when that is over `max_bytes`, without the
    per-group details in TRIMMABLE (then `"trimmed": [...]` says which went)."""
    value = json.dumps(report, separators=(",", ":")).encode()
    trimmed: list[str] = []
    for part in TRIMMABLE:
        if len(value) <= max_bytes:
            break
        report = {**report, "groups": [{k: v for k, v in g.items() if k != part} for g in report.get("groups", [])]}
        trimmed.append(part)
        value = json.dumps({**report, "trimmed": trimmed}, separators=(",", ":")).encode()
    return value


def read_report_value(value: bytes) -> dict[str, Any]:
    return json.loads(value.decode())


def printed_line(report: dict[str, Any]) -> str:
    """The report as the job prints it: the mark, then its JSON (trimmed to MAX_PRINTED_BYTES)."""
    return PRINTED_MARK + report_value(report, MAX_PRINTED_BYTES).decode()


def printed_report(lines: list[str]) -> dict[str, Any] | None:
    """The report the job printed last (`printed_line`), None when it printed none."""
    for line in reversed(lines):
        if line.startswith(PRINTED_MARK):
            try:
                return json.loads(line[len(PRINTED_MARK):])
            except ValueError:
                return None  # cut short on its way: the caller falls back on the summary lines
    return None
