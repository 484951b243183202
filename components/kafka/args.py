"""KafkaClusterArgs: what a KafkaCluster is built from."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi

from mirrorstack.described import PLATFORM, described
from mirrorstack.platforms.base import Platform
from mirrorstack.model.spec import Cluster


@dataclass(frozen=True, kw_only=True)
class KafkaClusterArgs:
    cluster: Cluster = described("the validated cluster spec (clusters.<alias> of the topology): brokers, "
                                 "controllers, security, settings, resources, or `external`")
    platform: Platform = described(PLATFORM)
    stack: str = described("the stack name; the KRaft cluster id is derived from it and the alias, so it must "
                           "not change between ups")
    metrics: bool = described("every node runs the JMX exporter and is listed in `scrape_targets`",
                              default=False)
    secrets: pulumi.Input[dict] | None = described(
        "an external cluster's secret client settings (mirrorstack:clusterSecrets.<alias>: setting → value; "
        "`password` is the SASL password), or None", default=None)
    secret_keys: frozenset[str] = described("the keys of `secrets` (known before deployment, unlike their "
                                            "values: the graph is built from them)", default=frozenset())
    authorization: bool = described("run the authorizer, deny by default (Topology.authorizes)", default=False)
    principals: tuple[str, ...] = described("application users of this cluster (topology `principals`): each gets "
                                            "a generated password", default=())
    quorum_guard: pulumi.Output | None = described(
        "an Output that fails when the controller count changed since the last up "
        "(mirrorstack.stack_history); the nodes' server.properties wait for it", default=None)
