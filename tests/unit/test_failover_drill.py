"""failover.drill: its rules, the FailoverDrill resource in the graph under Pulumi
mocks, the provider's diff/update with the run replaced by a recording fake, the
drill's spec and rendering, and the rights it needs (the drill itself runs
against live clusters in tests/integration/test_failover.py)."""
from __future__ import annotations

import copy

import pytest
import yaml

from mirrorstack import topology as topology_module
from mirrorstack.failover import drill_resource, switch
from mirrorstack.failover.drill_report import describe_drill, render_drill
from mirrorstack.failover.drill_resource import FailoverDrillProvider, drill_spec
from mirrorstack.failover.procedure import GateFailed
from mirrorstack.model.spec import load_topology
from tests.support.promtool import promtool
from tests.support.failover_pair import build, only, pair, problems, props

DRILL_TYPE = "pulumi-python:dynamic/failover:FailoverDrill"
DRILL = {"run": "2026-12-03", "rpo_seconds": 60.0, "rpo_records": None, "wait_seconds": 60.0, "proof_records": 100,
         "pass_within_days": 90.0}


def test_the_drill_loads_with_its_defaults():
    drill = load_topology(pair(drill={"run": "2026-12-03"})).failover.drill
    assert drill.model_dump() == DRILL


@pytest.mark.parametrize("run", ["", "a b", "-x", "x" * 65, "q1/drill"])
def test_a_drill_name_must_be_a_group_name_part(run):
    assert any(p.startswith("failover.drill.run:") for p in problems(pair(drill={"run": run})))


def test_no_drill_while_unplanned():
    found = problems(pair(active="standby", unplanned=True, drill={"run": "d1"}))
    assert "unplanned true" in only(found, "failover.drill")


def test_no_drill_after_a_cutover():
    data = pair(active="standby", cutover=True, drill={"run": "d1"})
    data["flows"] = data["flows"][:1]
    assert "nothing flows back" in only(problems(data), "failover.drill")
    data["failover"]["active"] = "primary"  # before the cutover: a drill of it
    assert load_topology(data).failover.drill.run == "d1"


def test_one_drill_after_the_switch_and_the_pairs_flows(tmp_path, monkeypatch):
    data = pair(drill={"run": "d1", "rpo_seconds": 30})
    data["clusters"]["analytics"] = {}
    data["flows"].append({"source": "primary", "target": "analytics"})
    waits, real = [], topology_module.FailoverDrill

    def recording(name, args, opts):  # what the drill was told to wait for
        waits.extend(r._name for r in opts.depends_on or [])
        return real(name, args, opts)
    monkeypatch.setattr(topology_module, "FailoverDrill", recording)
    mocks, _, out = build(tmp_path, data, monkeypatch)
    [(name, props_)] = mocks.of_type(DRILL_TYPE).items()
    assert name == "failover-drill" and props_["drill"] == {
        **{k: v for k, v in DRILL.items() if v is not None}, "run": "d1", "rpo_seconds": 30.0}  # Pulumi drops None
    assert props_["forward"]["connectors"]["source"] == "primary->standby.MirrorSourceConnector"
    assert out["output"] == {"active": "primary", "report": None, "drill": None}
    assert sorted(waits) == ["dr-failover", "dr-primary->standby", "dr-standby->primary"]  # not the analytics flow


def test_no_drill_section_no_drill_resource(tmp_path, monkeypatch):
    mocks, _, out = build(tmp_path, pair(), monkeypatch)
    assert mocks.of_type(DRILL_TYPE) == {} and "drill" not in out["output"]


@pytest.mark.parametrize("active, flow, to", [("primary", "primary->standby", "standby"),
                                              ("standby", "standby->primary", "primary")])
def test_a_drill_rehearses_from_the_active_side_over_its_flow(active, flow, to):
    spec = drill_spec(props(active=active, drill=DRILL, exact={"enabled": True, "search_records": 500.0}))
    assert (spec["mode"], spec["from"], spec["to"]) == ("drill", active, to)
    assert spec["flow"]["description"]["name"] == flow and spec["drill"] == DRILL
    assert spec["exact"]["search_records"] == 500.0
    assert spec["flow"]["connect"]["connect_auth"] == {"username": "u", "password": "p"}


@pytest.fixture
def drills(monkeypatch):
    """switch.run replaced by a recording fake that returns a drill's report."""
    calls = []

    def run(spec, runner):
        calls.append((copy.deepcopy(spec), runner))
        if spec["drill"]["rpo_seconds"] == 0.5:
            raise GateFailed("the failover drill d9 did not pass\nno real group, connector or flow was touched")
        return {"mode": "drill", "run": spec["drill"]["run"], "from": spec["from"], "to": spec["to"],
                "at": "2026-12-03T10:00:00+00:00", "passed": True, "rto_seconds": 4.2,
                "rpo": {"records": 3, "seconds": 0.4, "partitions_behind": [], "unknown": []},
                "objective": {"rpo_seconds": 60.0}, "failed": [], "notes": [],
                "groups": {"g1": {"partitions": [{}], "translated_reread": 7,
                                  "proof": {"copy": "mirrorstack-drill.d1.g1", "reread": 0, "lost": 0,
                                            "compared": 40}}}}
    monkeypatch.setattr(switch, "run", run)
    return calls


def test_create_runs_the_drill_and_records_its_report(drills, capsys):
    result = FailoverDrillProvider().create(props(drill={**DRILL, "run": "d1"}, runner={"kind": "x"}))
    [(spec, runner)] = drills
    assert runner == {"kind": "x"} and spec["mode"] == "drill"
    assert result.outs["report"]["rto_seconds"] == 4.2
    err = capsys.readouterr().err
    assert "drill d1 primary -> standby starts (nothing real is touched)" in err
    assert "drill d1 primary -> standby at 2026-12-03T10:00:00+00:00: passed" in err
    assert "RPO: 3 record(s)" in err and "RTO: 4.2s" in err and "re-read 0  lost 0" in err


def test_only_a_new_run_name_drills_again(drills):
    provider, old = FailoverDrillProvider(), props(drill={**DRILL, "run": "d1"}, report={"run": "d1"})
    tighter = props(drill={**DRILL, "run": "d1", "rpo_seconds": 5.0})
    assert provider.diff("id", old, tighter).changes
    assert provider.update("id", old, tighter).outs["report"] == {"run": "d1"} and drills == []
    assert not provider.diff("id", old, props(drill={**DRILL, "run": "d1"})).changes
    result = provider.update("id", old, props(drill={**DRILL, "run": "d2"}))
    assert result.outs["report"]["run"] == "d2" and len(drills) == 1


def test_a_drill_that_does_not_pass_fails_the_update_with_its_reasons(drills):
    with pytest.raises(GateFailed, match="did not pass"):
        FailoverDrillProvider().update("id", props(drill=DRILL), props(drill={**DRILL, "run": "d9",
                                                                             "rpo_seconds": 0.5}))


def test_a_failed_proof_says_which_group_and_why():
    report = {"run": "d3", "from": "primary", "to": "standby", "at": "t", "passed": False, "rto_seconds": 2.0,
              "rpo": {"records": 0, "seconds": 0.0}, "objective": {"rpo_seconds": 60.0},
              "groups": {"g1": {"partitions": [{}, {}], "proof": {"reread": 2, "lost": 1, "compared": 9}},
                         "g2": {"partitions": []}},
              "failed": ["g1 (copy mirrorstack-drill.d3.g1): re-read 2, lost 1"], "notes": ["a note"]}
    text = render_drill(report)
    assert text.splitlines()[0].endswith(": FAILED")
    assert "g1     2 partition(s)  re-read 2  lost 1  by identity over 9 unread record(s)" in text
    assert "g2     no copy written" in text and "failed: g1 (copy" in text and "note: a note" in text


def test_the_drill_ships_with_the_switch_to_where_it_runs():
    from mirrorstack.shipping import project_imports
    assert "mirrorstack.failover.drill" in project_imports("mirrorstack.failover.in_pod")
    assert drill_resource.switch is switch


def test_a_drill_that_fails_its_proof_keeps_the_last_pass(drills, monkeypatch):
    provider = FailoverDrillProvider()
    passed = provider.create(props(drill={**DRILL, "run": "d1"})).outs["report"]
    assert passed["last_passed_at"] == passed["at"]
    real = switch.run
    monkeypatch.setattr(switch, "run", lambda spec, runner: {**real(spec, runner), "passed": False,
                                                             "at": "2026-12-04T10:00:00+00:00"})
    failed = provider.update("id", props(drill={**DRILL, "run": "d1"}, report=passed),
                             props(drill={**DRILL, "run": "d2"})).outs["report"]
    assert (failed["passed"], failed["last_passed_at"]) == (False, passed["at"])


def test_prometheus_records_the_last_drill_and_alerts_when_none_passed_in_time(tmp_path):
    """Under promtool (its clock starts at 0): a drill passed on day 1, 30 days allowed: quiet on day 20,
    firing on day 40; the figures are series."""
    from mirrorstack.monitoring.alerts import DRILL_OVERDUE, alert_rules_file, drill_records, drill_rule
    report = {"run": "d1", "from": "primary", "to": "standby", "passed": True, "rto_seconds": 4.5,
              "rpo": {"records": 7, "seconds": 1.5}, "at": "1970-01-02T00:00:00+00:00",
              "last_passed_at": "1970-01-02T00:00:00+00:00"}
    (tmp_path / "alerts.yml").write_text(alert_rules_file([drill_rule(30)], drill_records(report)))
    check = promtool("check", "rules", str(tmp_path / "alerts.yml"))
    assert check.returncode == 0, check.stdout + check.stderr
    labels = {"from": "primary", "to": "standby", "run": "d1"}
    firing = {"exp_labels": {"severity": "warning"},
              "exp_annotations": {"summary": "No failover drill passed for 39d 0h 0m 0s: run one (set "
                                             "failover.drill.run anew and run pulumi up)"}}
    (tmp_path / "test.yml").write_text(yaml.safe_dump({
        "rule_files": ["alerts.yml"], "evaluation_interval": "1h",
        "tests": [{"interval": "1d", "input_series": [],
                   "promql_expr_test": [{"expr": name, "eval_time": "1d", "exp_samples": [
                       {"labels": name + "{" + ", ".join(f'{k}="{v}"' for k, v in labels.items()) + "}",
                        "value": v}]}
                       for name, v in (("mirrorstack_failover_drill_rpo_records", 7),
                                       ("mirrorstack_failover_drill_rpo_seconds", 1.5),
                                       ("mirrorstack_failover_drill_rto_seconds", 4.5),
                                       ("mirrorstack_failover_drill_passed", 1))],
                   "alert_rule_test": [{"eval_time": "20d", "alertname": DRILL_OVERDUE, "exp_alerts": []},
                                       {"eval_time": "40d", "alertname": DRILL_OVERDUE, "exp_alerts": [firing]}]}]}))
    run = promtool("test", "rules", str(tmp_path / "test.yml"))
    assert run.returncode == 0, run.stdout + run.stderr
    # never a drill that passed: overdue at once
    (tmp_path / "alerts.yml").write_text(alert_rules_file([drill_rule(30)], drill_records(None)))
    never = yaml.safe_load((tmp_path / "test.yml").read_text())
    never["tests"][0].pop("promql_expr_test")
    never["tests"][0]["alert_rule_test"] = [{"eval_time": "31d", "alertname": DRILL_OVERDUE, "exp_alerts": [
        {**firing, "exp_annotations": {"summary": firing["exp_annotations"]["summary"].replace("39d", "31d")}}]}]
    (tmp_path / "test.yml").write_text(yaml.safe_dump(never))
    run = promtool("test", "rules", str(tmp_path / "test.yml"))
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_stacks_prometheus_waits_for_the_drill_and_has_its_alert(tmp_path, monkeypatch):
    data = pair(drill={"run": "d1", "pass_within_days": 7})
    data["monitoring"] = {}
    mocks, _, _ = build(tmp_path, data, monkeypatch)
    (prometheus,) = [r.inputs for r in mocks.resources if r.inputs and r.inputs.get("name") == "prometheus"]
    rules = yaml.safe_load(prometheus["files"]["alerts.yml"])["groups"][0]["rules"]
    [overdue] = [r for r in rules if r.get("alert") == "MirrorstackFailoverDrillOverdue"]
    assert overdue["expr"].endswith(f"> {7 * 86400}")


def test_the_preview_says_when_a_drill_runs():
    line = describe_drill("primary", "standby", "standby", {**DRILL, "run": "d2"}, "d1")
    assert line.startswith("drill d2 rehearses a switch standby -> primary after the flows: RPO within 60s")
    assert describe_drill("primary", "standby", "primary", {**DRILL, "run": "d1"}, "d1") is None  # ran already
    assert describe_drill("primary", "standby", "primary", None, "d1") is None


def test_a_partition_the_translation_could_not_move_fails_the_drill():
    """Its group would resume there at an unknown position: the drill proved nothing for it, whatever
    the other partitions' proofs say (seen on a loaded machine: no checkpoint of that partition yet)."""
    from mirrorstack.failover.drill import Drill
    spec = drill_spec(props(active="primary", drill=DRILL, exact={"enabled": True, "search_records": 500.0}))
    drill = Drill(spec, lambda _: None)
    commits = {"billing": {("orders", 0): 40, ("orders", 1): 10}, "audit": {("orders", 0): 7}}
    moved = {"billing": {"partitions": [{"from_topic": "orders", "to_topic": "primary.orders", "partition": 0}]},
             "audit": {"partitions": [{"from_topic": "orders", "to_topic": "primary.orders", "partition": 0}]}}
    assert drill.unmoved(commits, moved) == ["billing: orders/1 not moved (see the notes)"]
    moved["billing"]["partitions"].append({"from_topic": "orders", "to_topic": "primary.orders", "partition": 1})
    assert drill.unmoved(commits, moved) == []
