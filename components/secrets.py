"""A generated password kept in Pulumi state as a secret (e.g. Grafana's admin
password when `pulumi config set --secret mirrorstack:grafanaAdminPassword` was
not given): made once at create, stable across ups, never shown in plaintext."""
from __future__ import annotations

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider

from mirrorstack import naming
from mirrorstack.args import GeneratedPasswordArgs


class GeneratedPasswordProvider(ResourceProvider):
    def create(self, props):
        import secrets
        import uuid
        return CreateResult(id_=uuid.uuid4().hex, outs={**props, "result": secrets.token_urlsafe(int(props["length"]))})

    def diff(self, _id, olds, news):
        changed = olds.get("length") != news.get("length")
        return DiffResult(changes=changed, replaces=["length"] if changed else [])


class GeneratedPassword(Resource, module="secrets", name="GeneratedPassword"):
    """Built from GeneratedPasswordArgs (the defaults when not given). Output: `result` (secret)."""

    result: pulumi.Output[str]

    def __init__(self, name: str, args: GeneratedPasswordArgs = GeneratedPasswordArgs(),
                 opts: pulumi.ResourceOptions | None = None):
        resource_name, opts = naming.scoped(name, opts, dynamic=True)
        super().__init__(GeneratedPasswordProvider(), resource_name, {"length": str(args.length), "result": None},
                         pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["result"])))


def cluster_secret_keys(raw: str | None, config_key: str = "mirrorstack:clusterSecrets",
                        owners: str = "cluster aliases", owner: str = "alias") -> dict[str, set[str]]:
    """alias → the setting names of `mirrorstack:clusterSecrets` (its raw JSON);
    the values are dropped here, so nothing printed from this can leak them.
    Also reads `mirrorstack:connectSecrets` (owner: a Connect cluster's name)."""
    import json
    if not raw:
        return {}
    fix = f"`pulumi config set --secret --path '{config_key}.<{owner}>.password' <value>`"
    try:
        data = json.loads(raw)
    except ValueError:
        raise ValueError(f"{config_key}: not an object of {owners}; fix: set it with {fix}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f"{config_key}: must map {owners} to {{setting: value}}; fix: {fix}")
    return {alias: set(values) for alias, values in data.items()}
