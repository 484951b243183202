"""ReplicationTopologyArgs and GeneratedPasswordArgs: the Args of the
components at the package's top (mirrorstack.topology, mirrorstack.secrets);
each folder's components have theirs in the folder's args.py."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi

from mirrorstack.described import PLATFORM, described
from mirrorstack.platforms.base import Platform
from mirrorstack.model.spec import Topology


@dataclass(frozen=True, kw_only=True)
class ReplicationTopologyArgs:
    topology: Topology = described("the validated topology (mirrorstack.model.spec.load_topology, or built in "
                                   "code): clusters, Connect groups, flows, monitoring, validation, failover")
    platform: Platform = described(PLATFORM)
    stack: str = described("the stack name: KRaft cluster ids and the default Connect group ids "
                           "(mirrorstack-<stack>-<name>) derive from it, and connectors record it as their owner")
    validation_run_id: str | None = described("overrides validation.run_id (a new value re-runs the job)",
                                              default=None)
    grafana_password: pulumi.Input[str] | None = described(
        "Grafana's admin password (a secret); generated once when None", default=None)
    cluster_secrets: pulumi.Input[dict] | None = described(
        "external clusters' secret client settings (a secret: alias → {setting: value}; `password` is the SASL "
        "password), as mirrorstack:clusterSecrets", default=None)
    cluster_secret_keys: dict[str, set[str]] | None = described(
        "alias → the keys set in `cluster_secrets` (known before deployment: the graph is built from them)",
        default=None)
    connect_secrets: pulumi.Input[dict] | None = described(
        "external Connect groups' secrets (a secret: name → {password}), as mirrorstack:connectSecrets",
        default=None)
    connect_groups: dict[str, pulumi.Input[str]] | None = described(
        "Connect name → group id to keep (the ids of a deployed stack), when the spec names none", default=None)
    quorum_guards: dict[str, pulumi.Output] | None = described(
        "alias → an Output that fails when the cluster's controller count changed (mirrorstack.stack_history)",
        default=None)


@dataclass(frozen=True, kw_only=True)
class GeneratedPasswordArgs:
    length: int = described("the number of random bytes (the password is their URL-safe base64 text); a change "
                            "makes a new password", default=24)
