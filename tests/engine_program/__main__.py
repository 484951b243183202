"""A file on disk as a Pulumi dynamic resource: the smallest program that
exercises create, diff, update, read (refresh), delete and secrets."""
import os
from pathlib import Path

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

INPUTS = ("path", "content", "token")


class FileProvider(ResourceProvider):
    def create(self, props):
        Path(props["path"]).write_text(props["content"])
        return CreateResult(id_=props["path"], outs={k: props[k] for k in INPUTS})

    def diff(self, _id, olds, news):
        changed = [k for k in INPUTS if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=["path"] if "path" in changed else [],
                          delete_before_replace=True)

    def update(self, _id, _olds, news):
        Path(news["path"]).write_text(news["content"])
        return UpdateResult(outs={k: news[k] for k in INPUTS})

    def read(self, id_, props):
        path = Path(id_)
        if not path.exists():  # gone out of band: refresh drops it from the state
            return ReadResult(id_=None, outs={})
        return ReadResult(id_=id_, outs={**props, "content": path.read_text()})

    def delete(self, id_, _props):
        if os.path.exists(id_):
            os.remove(id_)


class ManagedFile(Resource):
    def __init__(self, name, path, content, token, opts=None):
        super().__init__(FileProvider(), name, {"path": path, "content": content, "token": token},
                         pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                             additional_secret_outputs=["token"])))


config = pulumi.Config()
managed = ManagedFile("greeting", config.require("path"), config.require("content"),
                      config.require_secret("token"))
pulumi.export("path", managed.id)
