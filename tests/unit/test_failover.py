"""The failover section: its rules (field path and fix), the flows' states it
forces, the FailoverSwitch resource in the graph under Pulumi mocks, and the
provider's diff/update logic with run_switch replaced by a recording fake
(the real procedure runs in tests/integration/test_failover.py)."""
from __future__ import annotations

import copy
import sys
import types
from pathlib import Path

import pytest
import yaml

import mirrorstack.failover
from mirrorstack.failover.switch import FailoverSwitchProvider, SwitchRefused, describe, switch_spec
from mirrorstack.model.spec import load_topology
from mirrorstack.mm2.flows import FlowDescription
from tests.support.failover_pair import PAIR, build, only, pair, problems, props

ROOT = Path(__file__).resolve().parents[2]
FAILOVER_TYPE = "pulumi-python:dynamic/failover:FailoverSwitch"

# ---------------------------------------------------------------- model rules

def test_the_pair_loads_with_the_gate_defaults():
    fo = load_topology(PAIR).failover
    assert (fo.primary, fo.standby, fo.active, fo.cutover, fo.unplanned, fo.groups) == (
        "primary", "standby", "primary", False, False, None)
    assert (fo.gate.in_flight, fo.gate.wait_seconds, fo.gate.allow_active_consumers) == (0, 120, False)


@pytest.mark.parametrize("side", ["primary", "standby"])
def test_an_unknown_side_is_refused_naming_the_clusters(side):
    found = problems(pair(**{side: "dr"}))
    problem = only(found, f"failover.{side}")
    assert "unknown cluster 'dr'" in problem and "use one of primary, standby" in problem


def test_the_same_cluster_on_both_sides_is_refused():
    found = problems(pair(standby="primary", active="primary"))
    assert "same as the primary 'primary'" in only(found, "failover.standby")


def test_active_must_be_one_of_the_sides():
    problem = only(problems(pair(active="elsewhere")), "failover.active")
    assert "neither the primary nor the standby" in problem and "'primary'" in problem and "'standby'" in problem


def test_a_missing_forward_flow_is_refused_with_the_flow_to_add():
    data = pair(cutover=True)
    data["flows"] = [{"source": "standby", "target": "primary", "connect": "standby"}]
    found = problems(data)
    assert any(p.startswith("failover: no flow primary->standby (the forward flow") and
               "add `- {source: primary, target: standby, checkpoints: true}`" in p for p in found), found


def test_without_cutover_the_reverse_flow_is_required():
    data = pair()
    data["flows"] = data["flows"][:1]
    [problem] = problems(data)
    assert problem.startswith("failover: no flow standby->primary (the reverse flow")
    assert "or set cutover: true" in problem


def test_a_cutover_refuses_a_reverse_flow():
    problem = only(problems(pair(cutover=True)), "flows[1]")
    assert "a cutover is final" in problem and "remove this flow" in problem


def test_a_cutover_needs_no_reverse_flow():
    data = pair(cutover=True)
    data["flows"] = data["flows"][:1]
    assert load_topology(data).reverse_flow() is None


@pytest.mark.parametrize("index", [0, 1])
def test_both_flows_must_checkpoint(index):
    data = pair()
    data["flows"][index]["checkpoints"] = False
    problem = only(problems(data), f"flows[{index}].checkpoints")
    assert "translates the groups' offsets from its checkpoints" in problem and "checkpoints: true" in problem


def test_identity_on_the_pair_is_refused_by_the_cycle_rule():
    data = pair()
    data["flows"][1]["replication_policy"] = "identity"
    problem = only(problems(data), "flows[1].replication_policy")
    assert "records would loop forever" in problem


def test_a_bad_group_regex_is_named_with_its_index():
    found = problems(pair(groups=["orders-.*", "(unclosed"]))
    assert "regex '(unclosed'" in only(found, "failover.groups[1]")


def test_gate_fields_are_typed_with_bounds():
    found = problems(pair(gate={"in_flight": -1, "wait_seconds": "soon"}))
    assert only(found, "failover.gate.in_flight")
    assert "a number" in only(found, "failover.gate.wait_seconds")


def test_an_unknown_key_in_the_section_is_refused():
    assert "allowed keys here are" in only(problems(pair(standy="x")), "failover.standy")


# ---------------------------------------------------------------- flow_state

@pytest.mark.parametrize("active, unplanned, forward, reverse", [
    ("primary", False, "running", "stopped"),
    ("standby", False, "stopped", "running"),
    ("standby", True, "stopped", "stopped"),  # the primary is lost: nothing to push to
    ("primary", True, "stopped", "stopped"),  # an unplanned failback: the standby is lost
])
def test_the_inactive_direction_is_stopped(active, unplanned, forward, reverse):
    t = load_topology(pair(active=active, unplanned=unplanned))
    assert (t.flow_state(t.forward_flow()), t.flow_state(t.reverse_flow())) == (forward, reverse)


def test_flows_outside_the_pair_keep_their_own_state():
    data = pair(active="standby")
    data["clusters"]["analytics"] = {}
    data["flows"].append({"source": "primary", "target": "analytics"})
    t = load_topology(data)
    assert t.flow_state(t.flows[2]) == "running"
    data["flows"][2]["state"] = "paused"
    t = load_topology(data)
    assert t.flow_state(t.flows[2]) == "paused"


def test_without_a_failover_section_every_flow_keeps_its_state():
    data = pair()
    del data["failover"]
    t = load_topology(data)
    assert [t.flow_state(f) for f in t.flows] == ["running", "running"]


def test_the_repo_stacks_carry_the_section():
    def topology(stack):
        return yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]["mirrorstack:topology"]
    ap = load_topology(topology("active-passive"))
    assert (ap.failover.primary, ap.failover.standby, ap.failover.active) == ("primary", "standby", "primary")
    assert ap.reverse_flow() is not None and {f.connect for f in ap.flows} == {"standby"}
    mig = load_topology(topology("migration"))
    assert (mig.failover.primary, mig.failover.standby, mig.failover.active, mig.failover.cutover) == (
        "old", "new", "old", True)


# ---------------------------------------------------------------- the resource graph under mocks

def test_one_switch_with_the_pairs_flows_and_both_sides(tmp_path, monkeypatch):
    mocks, _, out = build(tmp_path, pair(groups=["app-.*"], gate={"wait_seconds": 30}), monkeypatch)
    [switch] = mocks.of_type(FAILOVER_TYPE).items()
    name, props = switch
    assert name == "failover"
    assert (props["primary"], props["standby"], props["active"], props["cutover"], props["unplanned"]) == (
        "primary", "standby", "primary", False, False)
    assert props["groups"] == ["app-.*"]
    assert props["gate"] == {"in_flight": 0, "wait_seconds": 30.0, "allow_active_consumers": False}
    assert set(props["clusters"]) == {"primary", "standby"}
    assert all(c["bootstrap"].startswith("127.0.0.1:") for c in props["clusters"].values())
    forward, reverse = props["forward"], props["reverse"]
    # each flow as its description: what the switch reads its internal topics' names from
    there, back = (FlowDescription.from_dict(p["description"]) for p in (forward, reverse))
    assert (there.name, there.source, there.target) == ("primary->standby", "primary", "standby")
    assert (back.name, back.source, back.target) == ("standby->primary", "standby", "primary")
    assert there.checkpoints_topic() == "primary.checkpoints.internal"
    assert there.offset_syncs_topic() == "mm2-offset-syncs.primary.internal"
    assert back.checkpoints_topic() == "standby.checkpoints.internal"
    assert forward["connectors"] == {"source": "primary->standby.MirrorSourceConnector",
                                     "checkpoint": "primary->standby.MirrorCheckpointConnector",
                                     "heartbeat": "primary->standby.MirrorHeartbeatConnector"}
    assert forward["connect_name"] == reverse["connect_name"] == "standby"
    assert forward["connect"]["connect_url"].startswith("http://127.0.0.1:")
    assert out["output"] == {"active": "primary", "report": None}


def test_the_pairs_flows_wait_for_the_switch_and_others_do_not(tmp_path, monkeypatch):
    data = pair()
    data["clusters"]["analytics"] = {}
    data["flows"].append({"source": "primary", "target": "analytics"})
    _, depends, out = build(tmp_path, data, monkeypatch)
    assert out["switch"] in depends["primary->standby"] and out["switch"] in depends["standby->primary"]
    assert out["switch"] not in depends["primary->analytics"]


def test_an_unplanned_switch_waits_only_for_the_side_it_joins(tmp_path, monkeypatch):
    """A lost side's services may fail to restart in the same `up`: the switch must not wait for them."""
    def waits_for(data) -> set[str]:
        _, depends, _ = build(tmp_path, data, monkeypatch)
        return {r._name for r in depends["switch"] if "kafka" in type(r).__module__ or "local" in type(r).__module__}

    planned = waits_for(pair())
    data = pair()
    data["failover"].update(active="standby", unplanned=True)
    unplanned = waits_for(data)
    assert any("primary" in n for n in planned) and any("standby" in n for n in planned), planned
    assert unplanned and not any("primary" in n for n in unplanned), unplanned
    assert any("standby" in n for n in unplanned), unplanned


def test_no_section_no_switch_and_no_output(tmp_path, monkeypatch):
    data = pair()
    del data["failover"]
    mocks, depends, out = build(tmp_path, data, monkeypatch)
    assert mocks.of_type(FAILOVER_TYPE) == {} and out["switch"] is None and "output" not in out


def test_a_secured_rest_api_reaches_the_switch_only_as_a_secret(tmp_path, monkeypatch):
    data = pair()
    data["connect"]["standby"]["rest_auth"] = True
    mocks, _, _ = build(tmp_path, data, monkeypatch)
    [props] = mocks.of_type(FAILOVER_TYPE).values()
    from tests.support.pulumi_mocks import SECRET_SIG
    assert props["connect_auth"][SECRET_SIG] is not None  # wrapped as a secret on the wire
    assert "connect_auth" not in props["forward"]["connect"]


# ---------------------------------------------------------------- provider logic (run_switch faked)

@pytest.fixture
def switches(monkeypatch):
    """run_switch replaced by a fake that records what it gets (render_report is the real one)."""
    calls = []
    fake = types.ModuleType("mirrorstack.failover.procedure")

    def run_switch(spec, progress=print):
        calls.append(copy.deepcopy(spec))
        progress("gate passed")
        if spec.get("gate", {}).get("in_flight") == 99:
            raise fake.GateFailed("in flight: 5 records on 1 partition of orders\nnothing was changed")
        return {"from": spec["from"], "to": spec["to"], "mode": spec["mode"], "at": "2026-01-01T00:00:00+00:00",
                "gate": None, "notes": [], "groups": {"g1": {"reread": 3, "reread_at_most": None, "lost": 0,
                                                             "partitions": []}}}
    fake.GateFailed = type("GateFailed", (RuntimeError,), {})
    fake.run_switch = run_switch
    monkeypatch.setitem(sys.modules, "mirrorstack.failover.procedure", fake)
    # `from mirrorstack.failover import procedure` takes the package's attribute once it was imported
    monkeypatch.setattr(mirrorstack.failover, "procedure", fake, raising=False)
    return calls


def test_create_records_the_active_side_and_switches_nothing(switches):
    result = FailoverSwitchProvider().create(props())
    assert result.outs["active"] == "primary" and result.outs["report"] is None
    assert switches == []


@pytest.mark.parametrize("change, expected", [
    ({"active": "standby"}, True),
    ({"unplanned": True}, True),
    ({"gate": {"in_flight": 10.0, "wait_seconds": 30.0, "allow_active_consumers": False}}, True),
    ({"clusters": {"primary": {"bootstrap": "127.0.0.1:1"}}}, False),  # an address alone switches nothing
    ({"report": {"from": "x"}}, False),
])
def test_diff_is_a_change_only_for_the_sections_own_fields(change, expected):
    assert FailoverSwitchProvider().diff("id", props(), props(**change)).changes is expected


def test_a_new_pair_replaces_the_switch():
    assert FailoverSwitchProvider().diff("id", props(), props(standby="dr")).replaces == ["standby"]


def test_failover_runs_the_switch_with_the_forward_flow(switches, capsys):
    result = FailoverSwitchProvider().update("id", props(), props("standby"))
    [spec] = switches
    assert (spec["from"], spec["to"], spec["mode"]) == ("primary", "standby", "planned")
    assert spec["flow"]["description"]["name"] == "primary->standby"
    assert spec["back_flow"]["description"]["name"] == "standby->primary"
    assert spec["flow"]["connectors"] == {"source": "primary->standby.MirrorSourceConnector",
                                          "checkpoint": "primary->standby.MirrorCheckpointConnector",
                                          "heartbeat": None}
    assert spec["flow"]["connect"] == {"connect_url": "http://127.0.0.1:8083", "connect_urls": None,
                                       "connect_auth": {"username": "u", "password": "p"}, "connect_ca_file": None}
    assert "connect_name" not in spec["flow"]
    assert spec["clusters"]["standby"] == {"bootstrap": "127.0.0.1:9093", "client": {"security.protocol": "SSL"}}
    assert spec["gate"] == {"in_flight": 0, "wait_seconds": 30.0, "allow_active_consumers": False}
    assert spec["groups"] is None
    assert result.outs["active"] == "standby"
    assert result.outs["report"]["groups"]["g1"]["reread"] == 3 and result.outs["report"]["kind"] == "failover"
    err = capsys.readouterr().err
    assert "mirrorstack: failover: failover primary -> standby (planned) starts" in err
    assert "mirrorstack: failover: gate passed" in err
    assert "mirrorstack: failover: planned switch primary -> standby at 2026-01-01T00:00:00+00:00" in err
    assert "mirrorstack: failover:   g1" in err and "re-read 3" in err  # the report, in the up log
    assert "'password'" not in err and ": p\n" not in err


def test_failback_runs_the_switch_with_the_reverse_flow(switches):
    FailoverSwitchProvider().update("id", props("standby"), props("primary", groups=["app-.*"]))
    [spec] = switches
    assert (spec["from"], spec["to"]) == ("standby", "primary")
    assert spec["flow"]["description"]["name"] == "standby->primary"
    assert spec["back_flow"]["description"]["name"] == "primary->standby"
    assert spec["groups"] == ["app-.*"]


def test_unplanned_is_the_mode(switches):
    FailoverSwitchProvider().update("id", props(), props("standby", unplanned=True))
    assert switches[0]["mode"] == "unplanned"


def test_a_cutover_has_no_back_flow(switches):
    old = props(cutover=True, reverse=None)
    result = FailoverSwitchProvider().update("id", old, props("standby", cutover=True, reverse=None))
    assert switches[0]["back_flow"] is None and result.outs["report"]["kind"] == "cutover"


def test_going_back_after_a_cutover_is_refused_before_anything(switches):
    with pytest.raises(SwitchRefused, match="the cutover to standby is final") as info:
        FailoverSwitchProvider().update("id", props("standby", cutover=True, reverse=None),
                                        props("primary", cutover=True, reverse=None))
    assert "nothing was changed" in str(info.value)
    assert switches == []


def test_unplanned_back_to_false_only_records_it(switches):
    old = props("standby", unplanned=True, report={"from": "primary", "to": "standby"})
    result = FailoverSwitchProvider().update("id", old, props("standby"))
    assert switches == [] and result.outs["unplanned"] is False
    assert result.outs["report"] == {"from": "primary", "to": "standby"}  # the last switch's report stays


def test_unplanned_back_to_false_counts_the_moved_groups_once_the_side_left_is_back(switches):
    moved = {"g1": {"reread_at_most": 4, "partitions": [{"from_topic": "orders", "to_topic": "primary.orders",
                                                         "partition": 0.0, "old": 40.0, "new": 31.0}]}}
    last = {"from": "primary", "to": "standby", "mode": "unplanned", "groups": moved}
    result = FailoverSwitchProvider().update("id", props("standby", unplanned=True, report=last), props("standby"))
    (spec,) = switches
    assert (spec["mode"], spec["from"], spec["to"], spec["moved"]) == ("returned", "primary", "standby", moved)
    assert spec["flow"]["description"]["name"] == "primary->standby"  # the flow that switch moved the groups by
    report = result.outs["report"]
    assert report["groups"] == moved and report["returned"]["mode"] == "returned", report  # the switch's own kept
    # a planned switch's report, or unplanned staying true: nothing counted
    FailoverSwitchProvider().update("id", props("standby", report={**last, "mode": "planned"}), props("standby"))
    FailoverSwitchProvider().update("id", props("standby", unplanned=True, report=last),
                                    props("standby", unplanned=True))
    assert len(switches) == 1


def test_a_failed_gate_fails_the_update_with_its_message(switches):
    gate = {"in_flight": 99, "wait_seconds": 1.0, "allow_active_consumers": False}
    with pytest.raises(RuntimeError, match="nothing was changed"):
        FailoverSwitchProvider().update("id", props(), props("standby", gate=gate))
    assert len(switches) == 1


def test_switch_spec_is_plain_json():
    import json
    spec = switch_spec(props(), props("standby"))
    assert json.loads(json.dumps(spec)) == spec


def test_the_switch_moves_exactly_by_default_and_as_the_failover_section_says():
    """A stack from before `exact` existed has no such prop: the switch still moves exactly; the
    section's fields reach run_switch (numbers come back from Pulumi's state as floats)."""
    assert switch_spec(props(), props("standby"))["exact"] == {"enabled": True, "search_records": 100_000}
    chosen = props("standby", exact={"enabled": False, "search_records": 500.0})
    assert switch_spec(props(), chosen)["exact"] == {"enabled": False, "search_records": 500.0}
    # recorded, never a switch by itself
    assert not FailoverSwitchProvider().diff("id", props(), {**props(), "exact": chosen["exact"]}).changes


# ---------------------------------------------------------------- what the preview says

def test_the_preview_says_what_the_switch_does():
    line = describe("primary", "standby", "primary", "standby", cutover=False, unplanned=False,
                    gate={"in_flight": 0, "wait_seconds": 120, "allow_active_consumers": False})
    assert line.startswith("failover primary -> standby, planned: the gate waits up to 120s")
    assert "primary->standby stops" in line and "then standby->primary starts" in line
    back = describe("primary", "standby", "standby", "primary", cutover=False, unplanned=False)
    assert back.startswith("failback standby -> primary, planned") and "standby->primary stops" in back
    lost = describe("primary", "standby", "primary", "standby", cutover=False, unplanned=True)
    assert "unplanned (primary is lost): no gate" in lost and "starts" not in lost
    cut = describe("old", "new", "old", "new", cutover=True, unplanned=False)
    assert cut.startswith("cutover old -> new") and cut.endswith("final: no way back")
    assert describe("primary", "standby", None, "primary", cutover=False, unplanned=False) is None
    assert describe("primary", "standby", "primary", "primary", cutover=False, unplanned=False) is None


class _Unreadable:
    """A side whose partitions and ends answer but whose records do not come (a broker gone mid-switch)."""

    def partitions(self):
        return {"orders": [0], "primary.orders": [0]}

    def watermarks(self, keys):
        return {k: (0, 10) for k in keys}

    def first_record(self, *_):
        raise RuntimeError("primary: orders/0 gave no record for 30s at offset 4 (reading up to 10)")


def test_a_search_that_fails_after_the_connectors_stopped_leaves_mm2s_translation_and_says_why():
    from mirrorstack.failover import rules
    from mirrorstack.failover.procedure import Switch
    switch = Switch(switch_spec(props(), props("standby")), lambda _: None)
    groups = {"g1": rules.group_entry([rules.partition_entry("orders", "primary.orders", 0, 4, 2, exact=4)])}
    switch.move_exactly(groups, _Unreadable(), _Unreadable())
    (row,) = groups["g1"]["partitions"]
    assert (row["new"], row["exact_by"], row["translated"]) == (2, "translation", 2)
    assert switch.notes == ["g1: orders/0 at 4: the search failed (RuntimeError: primary: orders/0 gave no record "
                            "for 30s at offset 4 (reading up to 10)); moved to MM2's translated offset 2 on "
                            "primary.orders"]
