"""What the validation job's output says, read the same wherever it ran.

The job prints its progress and, at the end, its summary (spark/report.py
`summary_text`: `replication check <STATUS>: ...`, a line per target topic with
its counts and samples, and each failure as `FAIL <failure>`). Every platform
passes on the same lines (`is_progress`) while the job runs, and a failed
validation fails `up` with the same message (`failed_message`) naming each
failure, with where the whole report is. The report itself reaches `up` as a
record on the report topic where `up` reaches the target cluster (`read_report`:
local, a Spark cluster, a job submitted by hand), else as the job's last printed
line (`printed_report`: docker's container, kubernetes' pod, whose networks
alone resolve the clusters' addresses): the stack output is its summary either way.

Pure: no pulumi."""
from __future__ import annotations

import re
import time

from mirrorstack.mm2.client_settings import librdkafka_config, resolve_reference
from mirrorstack.mm2.validation_reports import REPORT_TOPIC, printed_report, read_report_value
from mirrorstack.platforms.descriptions import JobOutput
from mirrorstack.validation.job_config import validation_summary

# The job's lines worth showing while it runs: its progress, the summary and its failures.
PROGRESS_PREFIXES = ("validate_replication", "replication check", "  ", "bad input", "error")
EXIT_FAILED = 1  # the job's exit code for a failed validation (spark/config.py); 2: bad input, 3: could not run
_STATUS = re.compile(r"^replication check ([A-Z ]+):")
_FAIL = re.compile(r"^\s+FAIL (.+)$")


def is_progress(line: str) -> bool:
    return line.startswith(PROGRESS_PREFIXES)


def failed_message(name: str, where: str, failures: list[str]) -> str:
    """A failed validation, as `up` says it on every platform."""
    return (f"{name}: replication validation FAILED (set `validation.report_only: true` to report without failing "
            f"`up`); full report: {where}\n" + "\n".join(failures))


def could_not_run_message(name: str, exit_code, lines: list[str], hint: str = "") -> str:
    return (f"{name}: the validation job could not run (exit {exit_code}){hint}; output:\n"
            + "\n".join(lines[-30:]))


def printed_outcome(lines: list[str]) -> dict | None:
    """The summary the job printed: {status (passed, failed, nothing-checked), passed,
    failures, summary (its lines)}; None when it printed none (it could not run)."""
    starts = [i for i, line in enumerate(lines) if _STATUS.match(line)]
    if not starts:
        return None
    summary = [lines[starts[-1]]]
    for line in lines[starts[-1] + 1:]:
        if not line.startswith("  "):
            break
        summary.append(line)
    status = _STATUS.match(summary[0]).group(1).strip().lower().replace(" ", "-")
    return {"status": status, "passed": status == "passed",
            "failures": [m.group(1) for m in map(_FAIL.match, summary[1:]) if m], "summary": summary}


class ReportUnreadable(LookupError):
    """The report's cluster cannot be read from here (a client setting librdkafka lacks)."""


# Records are stamped by the job's machine, whose clock may run behind ours.
CLOCK_MARGIN_MS = 300_000


def read_report(report_to: dict, key: str, timeout: float, since_ms: int | None = None) -> dict | None:
    """The report the job wrote with `key` to its `report_to` topic (mirrorstack.mm2.validation_reports),
    waiting up to `timeout` seconds for it; None when none came. `since_ms`: when the run began (only
    records from then on are read, not the topic's history)."""
    import uuid

    from confluent_kafka import Consumer, KafkaException, TopicPartition

    problems: list[str] = []
    client = {k: resolve_reference(str(v), f"report_to.client.{k}", problems)
              for k, v in (report_to.get("client") or {}).items()}
    conf = librdkafka_config(report_to["bootstrap"], client)
    if conf is None or problems:
        raise ReportUnreadable(f"{report_to['bootstrap']}: {'; '.join(problems) or 'Java-only client settings'}")
    partition = TopicPartition(report_to.get("topic", REPORT_TOPIC), 0)
    consumer = Consumer({**conf, "group.id": f"mirrorstack-validate-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "log_level": 2})
    deadline, read_to = time.monotonic() + timeout, None
    try:
        while True:
            try:
                low, high = consumer.get_watermark_offsets(partition, timeout=5, cached=False)
            except KafkaException:  # no such topic yet
                low = high = 0
            if read_to is None and high > 0:  # where this run's records can begin
                read_to = low if since_ms is None else _offset_since(consumer, partition, since_ms, high)
            if read_to is not None and high > read_to:  # only what came since the last look
                consumer.assign([TopicPartition(partition.topic, 0, max(low, read_to))])
                while read_to < high:
                    message = consumer.poll(5)
                    if message is None:
                        break
                    if message.error() is None:
                        read_to = message.offset() + 1
                        if message.key() == key.encode():
                            return read_report_value(message.value())
            if time.monotonic() > deadline:
                return None
            time.sleep(1)
    finally:
        consumer.close()


def _offset_since(consumer, partition, since_ms: int, high: int) -> int:
    from confluent_kafka import TopicPartition
    asked = TopicPartition(partition.topic, partition.partition, max(0, since_ms - CLOCK_MARGIN_MS))
    (found,) = consumer.offsets_for_times([asked], timeout=5)
    return found.offset if found.offset >= 0 else high  # none that recent: from the end


# What a platform is handed to run the job and say how it went (descriptions.SparkJob.output).
JOB_OUTPUT = JobOutput(failed_exit=EXIT_FAILED, is_progress=is_progress, printed_outcome=printed_outcome,
                       failed_message=failed_message, could_not_run_message=could_not_run_message,
                       report_summary=validation_summary, read_report=read_report,
                       printed_report=printed_report)
