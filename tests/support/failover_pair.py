"""A failover pair's topology, its resource graph under Pulumi mocks and a FailoverSwitch's props, as the
failover tests build them (tests/unit/test_failover.py, test_failover_drill.py)."""
from __future__ import annotations

import copy

import pulumi
import pytest
import yaml

from mirrorstack import topology as topology_module
from mirrorstack.args import ReplicationTopologyArgs
from mirrorstack.mm2.flows import FlowDescription
from mirrorstack.model.spec import TopologyError, load_topology
from mirrorstack.platforms.local.platform import LocalPlatform
from mirrorstack.topology import ReplicationTopology
from tests.support.pulumi_mocks import RecordingMocks

PAIR = yaml.safe_load("""
platform: local
clusters:
  primary: {brokers: 1}
  standby: {brokers: 1}
connect:
  standby: {kafka: standby, push: true}
flows:
  - {source: primary, target: standby, connect: standby}
  - {source: standby, target: primary, connect: standby}
failover: {primary: primary, standby: standby, active: primary}
""")


def pair(**failover) -> dict:
    data = copy.deepcopy(PAIR)
    data["failover"].update(failover)
    return data


def problems(data: dict) -> list[str]:
    with pytest.raises(TopologyError) as info:
        load_topology(data)
    return info.value.problems


def only(found: list[str], path: str) -> str:
    [problem] = [p for p in found if p.startswith(f"{path}:")]
    assert "fix:" in problem, problem
    return problem


def build(tmp_path, data: dict, monkeypatch, stack: str = "dr"):
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="mirrorstack", stack=stack, preview=False)
    topology = load_topology(data)
    depends: dict[str, list] = {}
    real = topology_module.MirrorMaker2

    def recording(name, args, opts):  # what each flow's component was told to wait for
        depends[args.flow.name] = list(opts.depends_on or [])
        return real(name, args, opts)
    monkeypatch.setattr(topology_module, "MirrorMaker2", recording)
    real_switch = topology_module.FailoverSwitch

    def recording_switch(name, args, opts):  # what the switch was told to wait for
        depends["switch"] = list(opts.depends_on or [])
        return real_switch(name, args, opts)
    monkeypatch.setattr(topology_module, "FailoverSwitch", recording_switch)
    out = {}

    @pulumi.runtime.test
    def program():
        t = ReplicationTopology(stack, ReplicationTopologyArgs(
            topology=topology, platform=LocalPlatform(stack, str(tmp_path)), stack=stack))
        out["switch"] = t.switch
        if t.failover_output is None:
            return None
        return t.failover_output.apply(lambda o: out.update(output=o))
    program()
    return mocks, depends, out


def props(active: str = "primary", **changes) -> dict:
    described = FlowDescription("primary->standby", "primary", "standby")
    flow = {"description": described.to_dict(),
            "connectors": {"source": "primary->standby.MirrorSourceConnector",
                           "checkpoint": "primary->standby.MirrorCheckpointConnector"},  # heartbeat None: dropped
            "connect_name": "standby", "connect": {"connect_url": "http://127.0.0.1:8083"}}
    back = {**flow, "description": FlowDescription("standby->primary", "standby", "primary").to_dict(),
            "connectors": {"source": "standby->primary.MirrorSourceConnector",
                           "checkpoint": "standby->primary.MirrorCheckpointConnector",
                           "heartbeat": "standby->primary.MirrorHeartbeatConnector"}}
    base = {"primary": "primary", "standby": "standby", "active": active, "cutover": False, "unplanned": False,
            "gate": {"in_flight": 0.0, "wait_seconds": 30.0, "allow_active_consumers": False},
            "clusters": {"primary": {"bootstrap": "127.0.0.1:9092", "client": {}},
                         "standby": {"bootstrap": "127.0.0.1:9093", "client": {"security.protocol": "SSL"}}},
            "forward": flow, "reverse": back, "connect_auth": {"standby": {"username": "u", "password": "p"}},
            "report": None}
    base.update(changes)
    return base
