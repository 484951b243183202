"""The flows whose connector configs tests/unit/golden/connector-configs.json
holds: every flow of every stack file in stacks/, placed as that stack places
it (pull or push, its replication factor), and flows with each optional setting
switched. Each case is (topology, flow, the generator's keyword arguments);
`generated` runs the connector generator on whatever `describe` makes of the
flow, so the same cases check the generator whatever it takes."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from mirrorstack.model.spec import Flow, Topology, load_topology

REPO = Path(__file__).resolve().parents[2]
BASE = {"clusters": {"us": {"brokers": 1}, "central": {"brokers": 3}}}
CLIENT = {"security.protocol": "SSL", "ssl.truststore.location": "/etc/ca.p12"}
# One flow us -> central per case, each switching optional settings away from their defaults.
VARIANTS = {
    "defaults": {},
    "exactly-once": {"exactly_once": True},
    "no-checkpoints-no-heartbeats": {"checkpoints": False, "heartbeats": False},
    "no-heartbeats": {"heartbeats": False},
    "naming": {"replication_policy": "identity", "separator": "_", "topics": ["orders", "clicks.*"],
               "topics_exclude": ["clicks.tmp", "__.*"], "groups": ["billing-.*"], "groups_exclude": ["batch"]},
    "sync-switches": {"sync_topic_configs": False, "config_sync_seconds": 30, "sync_topic_acls": True,
                      "sync_group_offsets": True},
    "config-sync": {"config_sync_seconds": 30},
    "tasks-and-refresh": {"tasks_max": 7, "refresh_seconds": 11, "replication_factor": 2},
    "throughput": {"throughput": {"batch_bytes": 65536, "linger_ms": 20, "in_flight": 3, "compression": "lz4",
                                  "max_record_bytes": 8 * 2**20, "poll_records": 2000}},
    "small-records": {"throughput": {"max_record_bytes": 2**20, "compression": "none"}},
    "overrides": {"overrides": {"source": {"producer.override.linger.ms": "50", "offset.lag.max": "10"},
                                "checkpoint": {"emit.checkpoints.interval.seconds": "5"},
                                "heartbeat": {"emit.heartbeats.interval.seconds": "2"}}},
    "connector-names": {"connector_names": {"source": "mm2-msc", "heartbeat": "mm2-hbc"}},
    "take-over": {"take_over": {"source": "old-msc", "checkpoint": "old-cpc", "heartbeat": "old-hbc"},
                  "heartbeats": False},
    "take-over-renamed": {"take_over": {"source": "old-msc"}, "connector_names": {"source": "mm2-msc"}},
    "everything": {"exactly_once": True, "checkpoints": False, "tasks_max": 3, "refresh_seconds": 5,
                   "throughput": {"compression": "gzip", "poll_records": 10},
                   "overrides": {"source": {"consumer.override.fetch.min.bytes": "1"}},
                   "take_over": {"checkpoint": "old-cpc"}, "restart_trigger": "x", "state": "paused"},
}


def stack_files() -> list[Path]:
    return sorted((REPO / "stacks").glob("Pulumi.*.yaml"))


def _cases_of(topology: Topology, prefix: str, *, owner: str | None, rack: str | None):
    for flow in topology.flows:
        push = topology.connect[flow.connect].kafka != flow.target
        kwargs = {"replication_factor": topology.replication_factor(flow),
                  "source_bootstrap": f"{flow.source}-0:9092", "target_bootstrap": f"{flow.target}-0:9092",
                  "source_client": CLIENT, "target_client": {**CLIENT, "ssl.truststore.type": "PKCS12"},
                  "owner": owner, "push": push, "offsets_topic": f"mirrorstack-{flow.connect}-offsets" if push else None,
                  "consumer_rack": rack}
        yield f"{prefix}{flow.name}", topology, flow, kwargs


def cases() -> list[tuple[str, Topology, Flow, dict]]:
    """(case id, its topology, the flow, the generator's keyword arguments)."""
    found = []
    for path in stack_files():
        stack = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        topology = load_topology(yaml.safe_load(path.read_text())["config"]["mirrorstack:topology"])
        found += _cases_of(topology, f"{stack}/", owner=stack, rack=None)
    for variant, settings in VARIANTS.items():
        flow = {"source": "us", "target": "central", **settings}
        topology = load_topology({**BASE, "flows": [flow]})
        found += _cases_of(topology, f"pull-{variant}/", owner=None, rack=None)
        pushed = load_topology({**BASE, "connect": {"edge": {"kafka": "us", "push": True}},
                                "flows": [{**flow, "connect": "edge"}]})
        found += _cases_of(pushed, f"push-{variant}/", owner="lab", rack="${env:NODE_ZONE}")
    return found


def generated(describe) -> str:
    """Every case's connector configs, take-over map, topic excludes and
    throughput settings, as JSON (connectors and keys in the generator's order),
    with the generator given `describe(flow)`."""
    from mirrorstack.mirror.connectors import (mirror_connector_configs, take_over_names, throughput_settings,
                                               topics_exclude)
    out = {}
    for case, _topology, flow, kwargs in cases():
        described = describe(flow)
        out[case] = {"configs": mirror_connector_configs(described, **kwargs),
                     "take_over": take_over_names(described), "topics_exclude": topics_exclude(described),
                     "throughput": throughput_settings(described)}
    return json.dumps(out, indent=1) + "\n"
