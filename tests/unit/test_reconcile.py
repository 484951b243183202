"""The reconciler's decisions (mirrorstack.mirror.reconcile), driven through an
in-memory Connect: which connectors it refuses, which it moves to the flow's
state, how it carries offsets over a rename or a move. The client is a
parameter of every step, so a small fake of its interface stands in here; the
real Connect REST API is exercised by the integration tests (test_connect_mm2,
test_mirror_resource, test_connect_faults)."""
from __future__ import annotations

import pytest

from mirrorstack.connect.api import ConnectError
from mirrorstack.mirror import reconcile
from mirrorstack.mm2.connectors import CHECKPOINT, HEARTBEAT, MIRROR_PACKAGE, OWNER_KEY, SOURCE

ALL_PLUGINS = [f"{MIRROR_PACKAGE}.{kind}" for kind in (SOURCE, CHECKPOINT, HEARTBEAT)]
STATES = {"running": "RUNNING", "paused": "PAUSED", "stopped": "STOPPED"}


class InMemoryConnect:
    """The part of mirrorstack.connect.api.ConnectClient reconcile uses, over a
    dict of connectors; `calls` records every change, in order."""

    def __init__(self, url: str = "http://connect-a:8083", plugins=ALL_PLUGINS, answers: bool = True):
        self.url = url
        self._plugins = list(plugins)
        self.answers = answers
        self.connectors: dict[str, dict] = {}  # name → {config, state, tasks, offsets}
        self.rejections: dict[str, list[str]] = {}  # name → what validate says about it
        self.calls: list[tuple] = []

    def add(self, name: str, config: dict, state: str = "RUNNING", tasks=None, offsets=None):
        self.connectors[name] = {"config": dict(config), "state": state,
                                 "tasks": [{"id": 0, "state": state}] if tasks is None else tasks,
                                 "offsets": offsets or []}

    def quick(self):
        if not self.answers:
            raise ConnectError(f"{self.url} did not answer")
        return self

    def plugins(self) -> list[str]:
        return self._plugins

    def validate(self, name, config) -> list[str]:
        return self.rejections.get(name, [])

    def status(self, name):
        c = self.connectors.get(name)
        return None if c is None else {"connector": {"state": c["state"], "worker_id": "w1"}, "tasks": c["tasks"]}

    def expanded_status(self):
        return {name: {"status": self.status(name)} for name in self.connectors}

    def get_config(self, name):
        c = self.connectors.get(name)
        return None if c is None else dict(c["config"])

    def put_config(self, name, config):
        self.calls.append(("put_config", name))
        if name in self.connectors:
            self.connectors[name]["config"] = dict(config)
        else:  # Connect's PUT .../config creates a missing connector, running
            self.add(name, config)

    def create(self, name, config, state="running"):
        self.calls.append(("create", name, state))
        self.add(name, config, STATES[state], tasks=[] if state == "stopped" else None)

    def create_stopped(self, name, config):
        self.create(name, config, "stopped")

    def stop(self, name):
        self.calls.append(("stop", name))
        self.connectors[name].update(state="STOPPED", tasks=[])

    def set_state(self, name, state):
        self.calls.append(("set_state", name, state))
        self.connectors[name].update(state=STATES[state], tasks=[] if state == "stopped" else [{"id": 0}])

    def offsets(self, name):
        return list(self.connectors[name]["offsets"])

    def set_offsets(self, name, offsets):
        self.calls.append(("set_offsets", name, len(offsets)))
        self.connectors[name]["offsets"] = list(offsets)

    def reset_offsets(self, name):
        self.calls.append(("reset_offsets", name))
        self.connectors[name]["offsets"] = []

    def delete(self, name):
        self.calls.append(("delete", name))
        self.connectors.pop(name, None)


def config(owner: str | None = "edge", kind: str = SOURCE, **extra) -> dict:
    found = {"connector.class": f"{MIRROR_PACKAGE}.{kind}", **extra}
    return {**found, OWNER_KEY: owner} if owner else found


OFFSETS = [{"partition": {"topic": "orders", "partition": p}, "offset": {"offset": 10 * p}} for p in range(3)]


# ---------------------------------------------------------------- before anything changes

def test_workers_with_the_three_mirror_plugins_pass():
    reconcile.check_workers(InMemoryConnect())


def test_workers_without_a_mirror_plugin_are_refused_naming_it_and_the_fix():
    client = InMemoryConnect(plugins=[p for p in ALL_PLUGINS if not p.endswith(CHECKPOINT)])
    with pytest.raises(ConnectError, match=f"{client.url} has no {CHECKPOINT} plugin; fix: put Kafka's connect-mirror"):
        reconcile.check_workers(client)


def test_validation_errors_of_every_connector_are_raised_together():
    client = InMemoryConnect()
    reconcile.validate_all(client, {"a": config(), "b": config()})  # nothing to say: no error
    client.rejections = {"a": ["tasks.max: must be positive"], "b": ["topics: bad regex", "x: y"]}
    with pytest.raises(ConnectError) as info:
        reconcile.validate_all(client, {"a": config(), "b": config()})
    assert str(info.value).splitlines() == ["Kafka Connect rejected the MirrorMaker 2 configuration:",
                                            "  a: tasks.max: must be positive", "  b: topics: bad regex", "  b: x: y"]


def test_only_connectors_of_another_stack_or_made_by_hand_are_refused():
    client = InMemoryConnect()
    client.add("ours", config("edge"))
    client.add("theirs", config("central"))
    client.add("by-hand", config(None))
    client.add("adopted", config(None))
    wanted = {name: config("edge") for name in ("ours", "theirs", "by-hand", "adopted", "new")}
    problems = reconcile.owner_problems(client, wanted, adopt=["adopted"])
    assert len(problems) == 2
    assert problems[0].startswith(f"theirs on {client.url} belongs to the stack 'central'; fix:")
    assert problems[1].startswith(f"by-hand on {client.url} exists and was made outside mirrorstack; fix: adopt it")
    assert client.calls == []  # checking changes nothing


def test_a_source_connector_with_unchanged_names_is_not_checked_for_collisions():
    old = {"s": config(**{"replication.policy.separator": "."})}
    # a new separator on a checkpoint connector, a same-named source: nothing to ask Kafka
    reconcile.refuse_colliding_renames("us->central", old, {"s": config(**{"replication.policy.separator": "."})})
    reconcile.refuse_colliding_renames("us->central", {"c": config(kind=CHECKPOINT)},
                                       {"c": config(kind=CHECKPOINT, **{"replication.policy.separator": "_"})})


def test_renames_means_a_naming_key_changed_on_a_live_connector():
    dotted = config(**{"replication.policy.separator": "."})
    assert reconcile.renames(dotted, config(**{"replication.policy.separator": "_"}))
    assert reconcile.renames(dotted, config(**{"replication.policy.separator": ".",
                                                "replication.policy.class": "IdentityReplicationPolicy"}))
    assert not reconcile.renames(dotted, {**dotted, "tasks.max": "4"})
    assert not reconcile.renames(None, dotted) and not reconcile.renames(dotted, None)


# ---------------------------------------------------------------- what the live connectors look like

def props(client, state="running", names=("src", "chk", "hb"), flow="us->central"):
    return {"flow": flow, "connect_url": client.url, "state": state, "connectors": {n: {} for n in names}}


def test_live_problems_name_missing_failed_and_moved_connectors(capsys):
    client = InMemoryConnect()
    client.add("src", config(), tasks=[{"id": 0, "state": "FAILED", "worker_id": "w2", "trace": "boom\n at x"}])
    client.add("chk", config(kind=CHECKPOINT), state="PAUSED")
    problems = reconcile.live_problems(props(client), client)
    assert problems == {"src": "FAILED", "chk": "PAUSED", "hb": "MISSING"}
    assert "src: task 0 FAILED on w2: boom" in capsys.readouterr().err
    # quiet when asked: the update does not repeat what the diff said
    assert reconcile.live_problems(props(client), client, say=False) == problems
    assert capsys.readouterr().err == ""


def test_live_problems_pass_connectors_in_the_flows_state_or_on_their_way():
    client = InMemoryConnect()
    client.add("src", config(), state="PAUSED")
    client.add("chk", config(kind=CHECKPOINT), state="UNASSIGNED")  # Connect is moving it
    client.add("hb", config(kind=HEARTBEAT), state="PAUSED")
    assert reconcile.live_problems(props(client, state="paused", flow="paused-flow"), client) == {}


def test_live_problems_are_none_when_connect_does_not_answer(capsys):
    client = InMemoryConnect(answers=False)
    assert reconcile.live_problems(props(client, flow="down-flow"), client) == {}
    assert f"down-flow: Kafka Connect at {client.url} did not answer" in capsys.readouterr().err


# ---------------------------------------------------------------- moving connectors to the flow's state

def test_settle_moves_only_connectors_not_in_the_flows_state(capsys):
    client = InMemoryConnect()
    client.add("running", config())
    client.add("paused", config(), state="PAUSED")
    client.add("starting", config(), state="UNASSIGNED")
    reconcile.settle(client, ["running", "paused", "starting"], "running", drift={"paused": "PAUSED"})
    assert client.calls == [("set_state", "paused", "running")]
    assert f"paused on {client.url} is PAUSED, changed outside the stack; the flow's state is running: " \
           "resuming it" in capsys.readouterr().err


def test_settle_stops_a_stopped_flows_connector_until_no_task_is_left():
    client = InMemoryConnect()
    client.add("done", config(), state="STOPPED", tasks=[])
    client.add("lingering", config(), state="STOPPED")  # a task still there
    client.add("running", config())
    reconcile.settle(client, ["done", "lingering", "running"], "stopped")
    assert client.calls == [("set_state", "lingering", "stopped"), ("set_state", "running", "stopped")]


def test_configure_creates_a_missing_connector_in_the_flows_state_and_keeps_an_existing_ones():
    client = InMemoryConnect()
    reconcile.configure(client, "new-paused", config(), "paused")
    client.add("old", config(), state="PAUSED")
    reconcile.configure(client, "old", config(**{"tasks.max": "4"}), "paused")
    reconcile.configure(client, "new-running", config(), "running")
    assert client.calls == [("create", "new-paused", "paused"), ("put_config", "old"), ("put_config", "new-running")]
    assert client.connectors["old"]["state"] == "PAUSED" and client.connectors["old"]["config"]["tasks.max"] == "4"


def test_start_over_resets_the_offsets_under_the_new_config_then_sets_the_state():
    client = InMemoryConnect()
    client.add("src", config(), offsets=OFFSETS)
    reconcile.start_over(client, "src", config(**{"replication.policy.separator": "_"}), "running")
    assert client.calls == [("stop", "src"), ("put_config", "src"), ("reset_offsets", "src"),
                            ("set_state", "src", "running")]
    assert client.connectors["src"]["offsets"] == []
    reconcile.start_over(client, "src", config(), "stopped")
    assert client.calls[-1] == ("reset_offsets", "src")  # a stopped flow stays stopped


# ---------------------------------------------------------------- renames, moves and take-overs

def test_carry_over_without_the_old_connector_leaves_the_new_one_to_the_caller():
    client = InMemoryConnect()
    assert reconcile.carry_over(client, "old", client, "new", config()) is False
    assert client.calls == []


def test_a_renamed_connector_takes_the_old_ones_offsets_then_the_old_one_goes(capsys):
    client = InMemoryConnect()
    client.add("old", config(), offsets=OFFSETS)
    assert reconcile.carry_over(client, "old", client, "new", config(), "paused") is True
    assert client.calls == [("stop", "old"), ("create", "new", "stopped"), ("set_offsets", "new", 3),
                            ("set_state", "new", "paused"), ("delete", "old")]
    assert client.connectors["new"]["offsets"] == OFFSETS and "old" not in client.connectors
    assert "old replaced by new on http://connect-a:8083, 3 source offsets carried over" in capsys.readouterr().err


def test_a_connector_moved_to_another_connect_cluster_carries_its_offsets_there(capsys):
    old_cluster, new_cluster = InMemoryConnect("http://connect-a:8083"), InMemoryConnect("http://connect-b:8083")
    old_cluster.add("src", config(), offsets=OFFSETS)
    new_cluster.add("src", config(), state="RUNNING", offsets=[{"partition": {}, "offset": {}}])
    assert reconcile.carry_over(old_cluster, "src", new_cluster, "src", config(), "running")
    assert old_cluster.calls == [("stop", "src"), ("delete", "src")]
    assert new_cluster.calls == [("stop", "src"), ("put_config", "src"), ("set_offsets", "src", 3),
                                 ("set_state", "src", "running")]
    assert new_cluster.connectors["src"]["offsets"] == OFFSETS
    assert "src on http://connect-a:8083 replaced by src on http://connect-b:8083" in capsys.readouterr().err


def test_new_names_start_from_no_offsets():
    client = InMemoryConnect()
    client.add("old", config(), offsets=OFFSETS)
    client.add("new", config(), offsets=OFFSETS[:1])
    reconcile.carry_over(client, "old", client, "new", config(), "running", keep_offsets=False)
    assert client.calls == [("stop", "old"), ("stop", "new"), ("put_config", "new"), ("reset_offsets", "new"),
                            ("set_state", "new", "running"), ("delete", "old")]
    assert client.connectors["new"]["offsets"] == []


def test_one_connect_group_after_all_reconfigures_the_stopped_connector_in_place():
    """The workers moved but the group is the same: `old` and `new` are one connector."""
    client = InMemoryConnect()
    client.add("src", config(), offsets=OFFSETS)
    assert reconcile.carry_over(client, "src", client, "src", config(**{"tasks.max": "2"}), "running")
    assert client.calls == [("stop", "src"), ("put_config", "src"), ("set_state", "src", "running")]
    assert client.connectors["src"]["offsets"] == OFFSETS  # nothing to carry: they are its own


def test_a_taken_over_connector_is_only_deleted(capsys):
    client = InMemoryConnect()
    client.add("by-hand", config(None), offsets=OFFSETS)
    assert reconcile.carry_over(client, "by-hand", client, "mirrorstack-src", None) is True
    assert client.calls == [("stop", "by-hand"), ("delete", "by-hand")]
    assert "by-hand deleted (taken over)" in capsys.readouterr().err


def test_connectors_by_class():
    assert reconcile.by_class({"s": config(), "c": config(kind=CHECKPOINT)}) == {
        f"{MIRROR_PACKAGE}.{SOURCE}": "s", f"{MIRROR_PACKAGE}.{CHECKPOINT}": "c"}
