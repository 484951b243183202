"""A Spark job handed out instead of run (validation.submit: yourself), as a
Pulumi dynamic resource: for a Spark the platform does not run (EMR, Dataproc,
Databricks, your own spark-submit).

create (and update on new inputs or a new `run_id`) writes the job's main file,
its package zip and its input (0600) into its folder and says the exact
spark-submit line, with a new report key; the outputs hold them. The job sends
its report to its input's `report_to` topic under that key; every later `up`
looks there (diff) and, once it came, takes it (update): the summary becomes
`report`, and a failed validation fails `up` unless `report_only`. An `up`
`report_within_seconds` after the hand-out that finds no report fails, naming
the command and the topic.
"""
from __future__ import annotations

import shlex
import shutil
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from mirrorstack import naming
from mirrorstack.platforms.descriptions import JobOutput, SparkJob
from mirrorstack.platforms.local.spark_job import ValidationFailed, _progress, write_job_input

# Inputs whose change hands out a new command.
HAND_OUT_KEYS = ("config", "run_id", "job_sha256", "spark_version")
LOOK_SECONDS = 3  # how long one `up` looks for the report on its topic


class HandedOutJobProvider(ResourceProvider):
    """`output`, `make_zip`, `zip_name`, `hand_out_argv`: the job's (descriptions.SparkJob)."""

    def __init__(self, output: JobOutput, make_zip, zip_name: str, hand_out_argv):
        self.output, self.make_zip, self.zip_name, self.hand_out_argv = output, make_zip, zip_name, hand_out_argv

    def _hand_out(self, props) -> dict:
        folder = Path(props["workdir"])
        folder.mkdir(parents=True, exist_ok=True)
        job_file, config_file, zip_file = folder / Path(props["job_file"]).name, folder / "flows.json", \
            folder / self.zip_name
        job_file.write_text(Path(props["job_file"]).read_text())
        zip_file.write_bytes(self.make_zip())
        write_job_input(config_file, props["config"])
        key = uuid.uuid4().hex
        argv = self.hand_out_argv(job_file=job_file.name, config_file=config_file.name, zip_file=zip_file.name,
                                  report_key=key, spark_version=props["spark_version"])
        report_to = props["config"]["report_to"]
        submit = {"command": shlex.join(argv), "directory": str(folder), "report_key": key,
                  "report_topic": report_to.get("topic", "its report topic"), "report_cluster": report_to["bootstrap"],
                  "handed_out_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        _progress(f"{props['name']}: submit the validation job yourself, from {folder}:\n    {submit['command']}\n"
                  f"  (its report goes to topic {submit['report_topic']} at {submit['report_cluster']}; "
                  "the next `pulumi up` reads it)")
        return {**props, "submit": submit, "report": {"status": "awaiting-report", "passed": False,
                                                      "submit": submit}, "handed_out": time.time()}

    def _look(self, outs, timeout: float) -> dict | None:
        return self.output.read_report(outs["config"]["report_to"], outs["submit"]["report_key"], timeout,
                                       since_ms=int(float(outs["handed_out"]) * 1000))

    def _overdue(self, outs) -> bool:
        return time.time() - float(outs["handed_out"]) > float(outs["report_within_seconds"])

    def create(self, props):
        return CreateResult(id_=props["name"], outs=self._hand_out(props))

    def diff(self, _id, olds, news):
        changed = [k for k in HAND_OUT_KEYS if olds.get(k) != news.get(k)]
        if changed:
            return DiffResult(changes=True, replaces=[], delete_before_replace=False)
        awaiting = (olds.get("report") or {}).get("status") == "awaiting-report"
        # a report that came, or none in time: this `up` takes it, or says so
        pending = awaiting and (self._overdue(olds) or self._look(olds, LOOK_SECONDS) is not None)
        settled = all(olds.get(k) == news.get(k) for k in ("report_only", "report_within_seconds"))
        return DiffResult(changes=pending or not settled, replaces=[], delete_before_replace=False)

    def update(self, _id, olds, news):
        if any(olds.get(k) != news.get(k) for k in HAND_OUT_KEYS):
            return UpdateResult(outs=self._hand_out(news))
        outs = {**olds, "report_only": news["report_only"], "report_within_seconds": news["report_within_seconds"]}
        report = self._look(outs, LOOK_SECONDS)
        if report is None and not self._overdue(outs):
            return UpdateResult(outs=outs)  # still awaited
        if report is None:
            submit = outs["submit"]
            raise RuntimeError(
                f"{outs['name']}: the validation job handed out at {submit['handed_out_at']} has not reported to "
                f"topic {submit['report_topic']} at {submit['report_cluster']} within "
                f"{float(outs['report_within_seconds']):.0f}s; fix: submit it (from {submit['directory']}: "
                f"{submit['command']}), or give validation.run_id a new value for a new command")
        summary = {**self.output.report_summary(report), "submit": outs["submit"]}
        if summary["status"] == "failed" and outs["report_only"] != "true":
            raise ValidationFailed(self.output.failed_message(
                outs["name"], f"the record {outs['submit']['report_key']} on {outs['submit']['report_topic']}",
                summary["failures"]))
        _progress(f"{outs['name']}: the validation you submitted: {summary['status']}, "
                  f"{summary.get('records_checked', 0)} record(s) checked")
        return UpdateResult(outs={**outs, "report": summary})

    def read(self, id_, props):
        return ReadResult(id_=id_, outs=props)

    def delete(self, _id, props):
        shutil.rmtree(props["workdir"], ignore_errors=True)  # the handed-out files, its input with them


class HandedOutSparkJob(Resource, module="local", name="HandedOutSparkJob"):
    """Outputs: `report` (the stack output `validation`: `awaiting-report` with `submit`, then the
    report's summary), `submit` (command, directory, report key, topic and cluster)."""

    report: pulumi.Output[dict]
    submit: pulumi.Output[dict]

    def __init__(self, name: str, *, job: SparkJob, config: pulumi.Input[dict], workdir: str, run_id: str,
                 report_only: bool, report_within_seconds: float, spark_version: str,
                 opts: pulumi.ResourceOptions | None = None):
        resource_name, opts = naming.scoped(name, opts, dynamic=True)
        provider = HandedOutJobProvider(job.output, job.make_zip, job.zip_name, job.hand_out_argv)
        super().__init__(provider, resource_name, {
            "name": name, "job_file": str(job.entry), "job_sha256": job.sha256, "config": config,
            "workdir": workdir, "run_id": run_id, "report_only": "true" if report_only else "false",
            "report_within_seconds": str(report_within_seconds), "spark_version": spark_version,
            "report": None, "submit": None, "handed_out": None}, opts)
