"""SparkValidationJobArgs: what a SparkValidationJob is built from."""
from __future__ import annotations

from dataclasses import dataclass

import pulumi

from mirrorstack.described import PLATFORM, described
from mirrorstack.platforms.base import Platform
from mirrorstack.kafka.cluster import KafkaCluster
from mirrorstack.model.spec import Topology


@dataclass(frozen=True, kw_only=True)
class SparkValidationJobArgs:
    topology: Topology = described("the validated topology: its `validation` section and the flows it "
                                   "validates")
    clusters: dict[str, KafkaCluster] = described("alias → KafkaCluster, at least every validated flow's "
                                                  "source and target")
    platform: Platform = described(PLATFORM)
    flows: list[pulumi.Resource] = described(
        "the resources to wait for before the job starts (the flows' MirrorMaker2 components)",
        default_factory=list)
    run_id: str | None = described("overrides validation.run_id (a new value re-runs the job)", default=None)
    drill: pulumi.Output | None = described(
        "the failover drill's `report`: the job proves its group copies' positions by record identity (a new "
        "drill re-runs the job)", default=None)
