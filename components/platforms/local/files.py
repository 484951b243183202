"""Generated files on the local platform as a Pulumi dynamic resource (e.g. the
Grafana dashboards and provisioning, which no local process serves): create and
update write them, destroy removes the folder."""
from __future__ import annotations

import shutil
from pathlib import Path

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult


def _write(props) -> dict:
    folder = Path(props["folder"])
    for relative, content in props["files"].items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return {**props, "paths": sorted(str(folder / r) for r in props["files"])}


class LocalFilesProvider(ResourceProvider):
    def create(self, props):
        return CreateResult(id_=props["folder"], outs=_write(props))

    def diff(self, _id, olds, news):
        missing = any(not Path(p).is_file() for p in olds.get("paths") or [])
        changed = olds.get("files") != news.get("files") or missing
        return DiffResult(changes=changed, replaces=["folder"] if olds.get("folder") != news.get("folder") else [],
                          delete_before_replace=True)

    def update(self, _id, olds, news):
        shutil.rmtree(olds["folder"], ignore_errors=True)
        return UpdateResult(outs=_write(news))

    def read(self, id_, props):
        return ReadResult(id_=id_, outs=props)

    def delete(self, _id, props):
        shutil.rmtree(props["folder"], ignore_errors=True)


class LocalFiles(Resource):
    """Outputs: `paths` (the files written)."""

    paths: pulumi.Output[list]

    def __init__(self, name: str, *, folder: str, files: dict[str, pulumi.Input[str]],
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(LocalFilesProvider(), name, {"folder": folder, "files": files, "paths": None}, opts)
