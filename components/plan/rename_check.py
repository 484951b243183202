"""Before `up` renames a live flow (a new replication policy or separator), check
that Kafka can create every new name on the target: a name that differs from an
existing topic only by '.' and '_' is refused, and MM2's task would stall on it
with nothing said. Read from the source connector's own config, so the check
sees the clusters exactly as the connectors will."""
from __future__ import annotations

from mirrorstack.mm2.connector_keys import flow_description
from mirrorstack.mm2.flows import FlowDescription
from mirrorstack.plan import replication_plan as plan
from mirrorstack.plan.live_topics import read_names

SIDES = ("source", "target")


def _client_settings(config: dict[str, str], side: str) -> dict[str, str]:
    prefix = f"{side}.cluster."
    return {key[len(prefix):]: value for key, value in config.items()
            if key.startswith(prefix) and key[len(prefix):] not in ("alias", "bootstrap.servers")}


def _flow(config: dict[str, str]) -> FlowDescription:
    """The flow as its source connector will run it: what the plan needs to name its topics on the target."""
    return flow_description(config)


def rename_problems(config: dict[str, str]) -> list[str]:
    """What stops this source connector's new names from being created; [] when
    nothing does, or when a cluster cannot be read from here (the plan said so)."""
    live = {side: read_names(config[f"{side}.cluster.bootstrap.servers"], _client_settings(config, side))
            for side in SIDES}
    if any(found.error for found in live.values()):
        return []
    flow = _flow(config)
    return [plan.collision_message(name, clash, flow.target)
            for name, clash in plan.rename_collisions(flow, live["source"].topics, live["target"].topics)]
