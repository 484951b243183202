"""ConnectClusterArgs: what a ConnectCluster is built from."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi

from mirrorstack.described import PLATFORM, described
from mirrorstack.platforms.base import Platform
from mirrorstack.kafka.cluster import KafkaCluster
from mirrorstack.model import spec as model


@dataclass(frozen=True, kw_only=True)
class ConnectClusterArgs:
    spec: model.ConnectCluster = described(
        "the validated Connect group spec (connect.<name> of the topology): workers, settings, resources, "
        "rest_auth, or `external` (an existing group: nothing deployed, only how to reach it)")
    kafka: KafkaCluster = described("the Kafka cluster the workers bootstrap to (their config, offset and "
                                    "status topics)")
    platform: Platform = described(PLATFORM)
    metrics: bool = described("every worker runs the JMX exporter and is listed in `scrape_targets`",
                              default=False)
    exactly_once: bool = described("the workers support exactly-once source connectors (KIP-618)",
                                   default=False)
    clients: list[KafkaCluster] = described(
        "the Kafka clusters whose client folders the connectors reference (the flows' sources and targets; "
        "only secured ones matter)", default_factory=list)
    group_id: pulumi.Input[str] | None = described(
        "the Connect group id when the spec names none (default mirrorstack-<name>)", default=None)
    override_allowlist: list[str] = described(
        "client settings the connectors may override (push flows); empty: Kafka's default policy",
        default_factory=list)
    rest_password: pulumi.Input[str] | None = described(
        "an external group's REST password (a secret) for its `username`", default=None)
