"""What the platform was asked to run, as one dynamic resource per service:
`up` writes its record (a JSON file in the recording folder), `destroy`
removes it, and an unchanged request is no change."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

OUTPUTS = ("report",)  # what the provider adds to the inputs


def record_path(folder: str, service: str) -> Path:
    return Path(folder) / f"{service}.json"


def _write(props: dict) -> dict:
    path = record_path(props["folder"], props["service"])
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {k: v for k, v in props.items() if k not in ("folder", *OUTPUTS)}
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(record, indent=2, sort_keys=True))
    os.replace(temporary, path)
    # A job's report, as a run that checked nothing would say it.
    report = {"status": "recorded", "passed": False, "records_checked": 0} if props["kind"] == "spark-job" else None
    return {**props, "report": report}


class RecordingProvider(ResourceProvider):
    def create(self, props):
        return CreateResult(id_=props["service"], outs=_write(props))

    def diff(self, _id, olds, news):
        asked = lambda props: {k: v for k, v in props.items() if k not in OUTPUTS}  # noqa: E731
        return DiffResult(changes=asked(olds) != asked(news), replaces=["service"] if olds.get("service") != news["service"] else [])

    def update(self, _id, olds, news):
        return UpdateResult(outs=_write(news))

    def delete(self, _id, props):
        record_path(props["folder"], props["service"]).unlink(missing_ok=True)


class Recorded(Resource, module="recording", name="Recorded"):
    """`service` of `kind` (java, python, spark-job, prometheus, grafana,
    client-files) with what it was asked: its command lines, files, ports."""

    report: pulumi.Output[dict]

    def __init__(self, resource_name: str, *, folder: str, service: str, kind: str,
                 opts: pulumi.ResourceOptions | None = None, **asked):
        super().__init__(RecordingProvider(), resource_name,
                         {"folder": folder, "service": service, "kind": kind, **asked, "report": None}, opts)
