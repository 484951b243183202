"""Generated files on the local platform as a Pulumi dynamic resource (e.g. the
Grafana dashboards and provisioning, which no local process serves): create and
update write them, destroy removes the folder."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from mirrorstack import naming


def _write(props) -> dict:
    folder = Path(props["folder"])
    if props.get("secret"):  # 0600 files in a 0700 folder
        from mirrorstack.platforms.local.service import write_secret_files
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_secret_files(folder, props["files"])
    for relative, content in ({} if props.get("secret") else props["files"]).items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return {**props, "paths": sorted(str(folder / r) for r in props["files"])}


class LocalFilesProvider(ResourceProvider):
    def create(self, props):
        return CreateResult(id_=props["folder"], outs=_write(props))

    def diff(self, _id, olds, news):
        if olds.get("folder") and not Path(olds["folder"]).is_dir():  # another machine (a PR runner): not checkable here
            print(f"mirrorstack: {olds['folder']}: not on this machine; could not check its files from here",
                  file=sys.stderr, flush=True)
            missing = False
        else:
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


class LocalFiles(Resource, module="local", name="LocalFiles"):
    """Outputs: `paths` (the files written). With `secret`, the contents stay
    secret in state and the files are 0600 in a 0700 folder."""

    paths: pulumi.Output[list]

    def __init__(self, name: str, *, folder: str, files: pulumi.Input[dict], secret: bool = False,
                 opts: pulumi.ResourceOptions | None = None):
        if secret:
            files = pulumi.Output.secret(files)
            opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["files"]))
        resource_name, opts = naming.scoped(name, opts, dynamic=True)
        super().__init__(LocalFilesProvider(), resource_name, {"folder": folder, "files": files, "secret": secret,
                                                      "paths": None}, opts)
