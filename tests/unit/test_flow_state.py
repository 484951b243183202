"""Flow state (running, paused, stopped): the model field, Topology.flow_state as
the one place that decides it, the MirrorMaker2Connectors input under Pulumi
mocks, and the provider's pure decisions (which status is the state, which
recorded or changed state is a diff). Against a real Connect:
tests/integration/test_mirror_resource.py; through the engine:
tests/integration/test_aggregation_stack.py."""
from __future__ import annotations

import socket

import pytest

from mirrorstack.connect.api import first_line, reached, summarize
from mirrorstack.mirror.provider import MirrorMaker2Provider
from mirrorstack.model.spec import Topology, TopologyError, load_topology, topology_json_schema
from tests.support.pulumi_mocks import build_local

TWO_FLOWS = {"clusters": {"us": {}, "uk": {}, "central": {}},
             "flows": [{"source": "us", "target": "central"}, {"source": "uk", "target": "central"}]}


def _with_states(*states):
    data = {**TWO_FLOWS, "flows": [dict(f) for f in TWO_FLOWS["flows"]]}
    for flow, state in zip(data["flows"], states):
        if state is not None:
            flow["state"] = state
    return data


def test_a_flow_runs_unless_the_stack_file_says_otherwise():
    topology = load_topology(_with_states(None, "paused"))
    assert [topology.flow_state(f) for f in topology.flows] == ["running", "paused"]
    assert topology.flow_state(load_topology(_with_states("stopped")).flows[0]) == "stopped"


def test_an_unknown_state_names_the_field_and_the_choices():
    with pytest.raises(TopologyError) as err:
        load_topology(_with_states(None, "Paused"))
    (problem,) = err.value.problems
    assert problem.startswith("flows[1].state: ")
    assert "fix: use one of 'running', 'paused', 'stopped' (case matters: 'paused')" in problem


def test_the_schema_documents_the_state():
    prop = topology_json_schema()["$defs"]["Flow"]["properties"]["state"]
    assert prop["enum"] == ["running", "paused", "stopped"] and prop["default"] == "running"
    assert "KIP-875" in prop["description"] and "offsets" in prop["description"]


def _connectors(mocks) -> dict[str, dict]:
    return {r.name: r.inputs for r in mocks.resources if r.typ.endswith("mirror:MirrorMaker2Connectors")}


def test_each_flows_connectors_get_its_state_and_running_is_left_out(tmp_path):
    mocks, _ = build_local(tmp_path, _with_states("stopped", None), stack="agg")
    connectors = _connectors(mocks)
    assert connectors["us->central-connectors"]["state"] == "stopped"
    assert "state" not in connectors["uk->central-connectors"]  # stacks deployed before states: no diff


def test_the_connectors_read_the_state_through_topology_flow_state(tmp_path, monkeypatch):
    """The failover section extends flow_state; nothing may read flow.state around it."""
    monkeypatch.setattr(Topology, "flow_state", lambda self, flow: "paused" if flow.source == "uk" else "stopped")
    mocks, _ = build_local(tmp_path, _with_states(None, None), stack="agg")
    connectors = _connectors(mocks)
    assert (connectors["us->central-connectors"]["state"], connectors["uk->central-connectors"]["state"]) == (
        "stopped", "paused")


def _status(connector: str, *tasks: str) -> dict:
    return {"connector": {"state": connector}, "tasks": [{"id": i, "state": s} for i, s in enumerate(tasks)]}


@pytest.mark.parametrize("status, state, expected", [
    (_status("RUNNING", "RUNNING", "RUNNING"), "running", True),
    (_status("RUNNING"), "running", True),  # no matching topic yet: no task, still running
    (_status("RUNNING", "RUNNING", "UNASSIGNED"), "running", False),
    (_status("PAUSED", "PAUSED"), "paused", True),
    (_status("PAUSED", "RUNNING"), "paused", False),  # a task still copying
    (_status("PAUSED", "PAUSED"), "running", False),
    (_status("STOPPED"), "stopped", True),
    (_status("STOPPED", "RUNNING"), "stopped", False),  # tasks not yet shut down
    (_status("PAUSED"), "stopped", False),
    (None, "stopped", False),  # missing is no state
])
def test_which_status_is_the_flow_state(status, state, expected):
    assert reached(status, state) is expected


@pytest.fixture
def unreachable_url():
    """A port nobody listens on: the diff's live check answers nothing there, at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _props(url: str, state: str | None, recorded: str) -> dict:
    props = {"flow": "us->central", "connect_url": url, "connectors": {"c": {"connector.class": "x"}},
             "timeout_seconds": "300", "states": {"c": {"state": recorded, "tasks": "0", "running_tasks": "0"}}}
    return {**props, "state": state} if state else props


@pytest.mark.parametrize("old, new, recorded, changes", [
    (None, None, "RUNNING", False),
    (None, "paused", "RUNNING", True),  # the stack file's state changed
    ("stopped", None, "STOPPED", True),
    ("stopped", "stopped", "STOPPED", False),  # stopped as wanted: no change, no wait
    ("paused", "paused", "PAUSED", False),
    (None, None, "PAUSED", True),  # paused by hand (seen by refresh): up resumes it
    ("paused", "paused", "RUNNING", True),  # resumed by hand: up pauses it again
    ("stopped", "stopped", "FAILED", True),
])
def test_the_diff_compares_the_state_wanted_with_the_one_recorded(unreachable_url, old, new, recorded, changes):
    olds, news = _props(unreachable_url, old, recorded), _props(unreachable_url, new, recorded)
    news.pop("states")
    assert MirrorMaker2Provider().diff("us->central", olds, news).changes is changes


WRAPPED = ("org.apache.kafka.connect.errors.ConnectException: Unrecoverable exception from producer send callback\n"
           "\tat org.apache.kafka.connect.runtime.AbstractWorkerSourceTask.maybeThrowProducerSendException(x:1)\n"
           "Caused by: org.apache.kafka.common.errors.RecordTooLargeException: The message is 200088 bytes\n")


def test_a_failure_is_told_by_its_first_line_and_its_root_cause():
    assert first_line(WRAPPED) == ("org.apache.kafka.connect.errors.ConnectException: Unrecoverable exception from "
                                   "producer send callback (caused by org.apache.kafka.common.errors."
                                   "RecordTooLargeException: The message is 200088 bytes)")
    assert first_line("java.lang.IllegalStateException: boom\n\tat a.b(c:1)") == \
        "java.lang.IllegalStateException: boom"
    assert first_line(None) == first_line("") == "(no trace)"


def test_recorded_states_name_failed_parts_only_when_there_are_some():
    healthy = _status("RUNNING", "RUNNING", "RUNNING")
    assert summarize(healthy) == {"state": "RUNNING", "tasks": "2", "running_tasks": "2"}
    broken = {"connector": {"state": "RUNNING", "worker_id": "w0"},
              "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "w0"},
                        {"id": 1, "state": "FAILED", "worker_id": "w1", "trace": WRAPPED}]}
    failed = summarize(broken)["failed"]
    assert failed.startswith("task 1 FAILED on w1: org.apache.kafka.connect.errors.ConnectException")
    assert "RecordTooLargeException" in failed and "task 0" not in failed
