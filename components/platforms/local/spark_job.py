"""The Spark validation job on the local platform, as a Pulumi dynamic resource.

create/update run the job's main file (spark/validate_replication.py) with this
project's PySpark (local[N] inside its own JVM), the package's zip on the
driver's PYTHONPATH and `--py-files` (the executors'), stream its progress,
and keep the report; the
summary becomes the resource's `report` output. A failed validation fails the
operation unless `report_only`; a job that cannot run always does. It runs
again when an input changes (flows, tolerance, the job's package) or on a
new `run_id`, never on a plain re-`up`. How its output reads (its progress
lines, its summary, the messages a failure is said with) is the job's own
(descriptions.JobOutput), handed to the provider with the builder of its zip.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from mirrorstack import naming
from mirrorstack.platforms.descriptions import JobOutput, SparkJob

# Inputs whose change means a new run.
RUN_KEYS = ("config", "run_id", "report_only", "driver_memory", "master", "job_sha256", "java_options", "cluster")
# How long a job that ended has to show its report on its topic (it wrote it before it exited).
REPORT_WAIT_SECONDS = 30
# What a cluster master's executors are asked for: CLI flag of the job per key of the `cluster` input.
CLUSTER_FLAGS = {"executor_memory": "--executor-memory", "executor_cores": "--executor-cores",
                 "max_cores": "--max-cores", "executor_wait_seconds": "--executor-wait-seconds"}


class ValidationFailed(RuntimeError):
    pass


def _progress(message: str) -> None:
    print(f"mirrorstack: {message}", file=sys.stderr, flush=True)


def _java_options(user_options: str | None) -> list[str]:
    """The driver's class-data archive when `make class-archives` made one (read
    at run time, so a stack's inputs do not depend on the machine), then the
    topology's `validation.jvm_options`, which win."""
    from mirrorstack import toolchain
    options = " ".join(filter(None, [toolchain.spark_archive_option(), user_options]))
    return [f"--java-options={options}"] if options else []  # "=": the value starts with "-"


def _run(props, output: JobOutput, make_zip: Callable[[], bytes], zip_name: str) -> dict:
    workdir = Path(props["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    config_file, report_file = workdir / "flows.json", workdir / "report.json"
    write_job_input(config_file, props["config"])
    report_file.unlink(missing_ok=True)
    package = workdir / zip_name  # built here, from the same tree the job's hash was taken of
    package.write_bytes(make_zip())
    cluster = props.get("cluster") or {}
    report_key = uuid.uuid4().hex  # this run's report, wherever the job sends it
    argv = [props["python"], props["job_file"], "--config", str(config_file), "--out", str(report_file),
            "--report-key", report_key,
            "--driver-memory", props["driver_memory"], "--master", props["master"], "--poll-seconds", "5",
            "--py-files", str(package), *(["--jars", props["jars"]] if props.get("jars") else []),
            *(arg for key, flag in CLUSTER_FLAGS.items() if key in cluster for arg in (flag, _plain(cluster[key]))),
            *_java_options(props.get("java_options"))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(package), *filter(None, [os.environ.get("PYTHONPATH")])])}
    _progress(f"{props['name']}: validating {len(props['config']['flows'])} flow(s) with Spark "
              f"({props['master']}); report: {report_file}")
    started, started_ms = time.monotonic(), int(time.time() * 1000)
    lines: list[str] = []
    # Own session: on timeout the job and its Spark JVM stop together, by our own pid.
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, cwd=workdir, env=env)
    pump = threading.Thread(target=_forward, args=(proc, lines, output.is_progress), daemon=True)
    pump.start()
    try:
        proc.wait(timeout=float(props["timeout_seconds"]))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pump.join(5)
        raise RuntimeError(f"{props['name']}: the validation job on {props['master']} ran over "
                           f"{props['timeout_seconds']}s and was stopped; last output:\n" + "\n".join(lines[-20:])
                           ) from None
    pump.join(5)
    code = proc.returncode
    report = _report(props, output, report_key, started_ms, report_file, code, lines)
    if code not in (0, output.failed_exit) or not report:
        raise RuntimeError(output.could_not_run_message(props["name"], code, lines))
    summary = output.report_summary(report)
    if summary["status"] == "failed" and props["report_only"] != "true":
        raise ValidationFailed(output.failed_message(props["name"], str(report_file), summary["failures"]))
    outcome = {"passed": "passed", "nothing-checked": "checked nothing (0 records selected)"}.get(
        summary["status"], "FAILED (report only)")
    _progress(f"{props['name']}: validation {outcome}, {summary['records_checked']} record(s) checked, "
              f"in {time.monotonic() - started:.0f}s")
    return {**props, "report": summary, "passed": summary["passed"], "report_file": str(report_file)}


def _report(props, output: JobOutput, key: str, started_ms: int, report_file: Path, code: int,
            lines: list[str]) -> dict:
    """The report of a job that ran (exit 0 or failed_exit) from where its config sends it (read as
    a managed service's run would be), else (it could not run, or that channel cannot be read from
    here) its --out file."""
    report_to = props["config"].get("report_to")
    if report_to and output.read_report is not None and code in (0, output.failed_exit):
        try:
            report = output.read_report(report_to, key, REPORT_WAIT_SECONDS, since_ms=started_ms)
        except LookupError:
            report = False
        if report is None:
            raise RuntimeError(
                f"{props['name']}: the validation job on {props['master']} ended (exit {code}) without a report on "
                f"topic {report_to.get('topic', 'its report topic')} at {report_to['bootstrap']} within "
                f"{REPORT_WAIT_SECONDS}s; last output:\n" + "\n".join(lines[-20:]))
        if report:
            return report
    return json.loads(report_file.read_text()) if report_file.is_file() else {}


def write_job_input(path: Path, config: dict) -> None:
    """The job's input, 0600 before anything is written: client settings may carry credentials."""
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(json.dumps(_whole_numbers(config), indent=2))


def _plain(value) -> str:
    return str(_whole_numbers(value))


def _whole_numbers(value):
    """Numbers come back from the engine as floats (0 → 0.0); the job wants integer counts."""
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _forward(proc: subprocess.Popen, lines: list[str], is_progress: Callable[[str], bool]) -> None:
    """Keep the job's output and show its progress and summary lines."""
    for line in proc.stdout:
        line = line.rstrip("\n")
        lines.append(line)
        if is_progress(line):
            _progress(line)


class LocalSparkJobProvider(ResourceProvider):
    """`output`, `make_zip`, `zip_name`: the job's (descriptions.SparkJob)."""

    def __init__(self, output: JobOutput, make_zip: Callable[[], bytes], zip_name: str):
        super().__init__()
        self.output, self.make_zip, self.zip_name = output, make_zip, zip_name

    def _run(self, props) -> dict:
        return _run(props, self.output, self.make_zip, self.zip_name)

    def create(self, props):
        return CreateResult(id_=props["name"], outs=self._run(props))

    def diff(self, _id, olds, news):
        changed = [k for k in RUN_KEYS if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def update(self, _id, olds, news):
        return UpdateResult(outs=self._run(news))

    def read(self, id_, props):
        return ReadResult(id_=id_, outs=props)

    def delete(self, _id, props):
        # the job's own folder: its input (0600), report, and what Spark leaves in its cwd
        shutil.rmtree(props["workdir"], ignore_errors=True)


class LocalSparkJob(Resource, module="local", name="LocalSparkJob"):
    """Outputs: `report` (the stack output `validation`), `passed`, `report_file`."""

    report: pulumi.Output[dict]
    passed: pulumi.Output[bool]
    report_file: pulumi.Output[str]

    def __init__(self, name: str, *, job: SparkJob, config: pulumi.Input[dict], workdir: str,
                 jars: str, report_only: bool, run_id: str, driver_memory: str, master: str,
                 timeout_seconds: int, java_options: list[str] = (), cluster: dict | None = None,
                 opts: pulumi.ResourceOptions | None = None):
        """`cluster`: what a cluster master's executors are asked for (CLUSTER_FLAGS' keys)."""
        resource_name, opts = naming.scoped(name, opts, dynamic=True)
        # only when set: a stack deployed before the input existed sees no change (no re-run)
        extra = {"java_options": " ".join(java_options)} if java_options else {}
        if cluster:
            extra["cluster"] = cluster
        provider = LocalSparkJobProvider(job.output, job.make_zip, job.zip_name)
        super().__init__(provider, resource_name, {**extra,
            "name": name, "job_file": str(job.entry), "job_sha256": job.sha256, "config": config,
            "workdir": workdir, "jars": jars, "python": sys.executable,
            "report_only": "true" if report_only else "false", "run_id": run_id,
            "driver_memory": driver_memory, "master": master, "timeout_seconds": str(timeout_seconds),
            "report": None, "passed": None, "report_file": None,
        }, opts)
