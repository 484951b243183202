"""Issue 46, defect 2: a set of flows whose copies come back round a cycle is
refused, whatever the policy and separators (components/model/cycles.py). Before
the fix, east<->west on `.*` with separators '.' and '-' was accepted and looped:
100 s after `up`, topic names of 230 characters."""
import pytest

from mirrorstack.model.cycles import returning_copy, simple_cycles
from mirrorstack.model.regex_witness import examples
from mirrorstack.model.spec import TopologyError, load_topology


def _pair(east_sep=".", west_sep=".", east_topics=(".*",), west_topics=(".*",), **more):
    return {"clusters": {"east": {}, "west": {}, **more.pop("clusters", {})},
            "flows": [{"source": "east", "target": "west", "topics": list(east_topics), "separator": east_sep},
                      {"source": "west", "target": "east", "topics": list(west_topics), "separator": west_sep},
                      *more.pop("flows", [])]}


def _problem(data) -> str:
    with pytest.raises(TopologyError) as raised:
        load_topology(data)
    return str(raised.value)


def test_mixed_separators_on_an_active_active_pair_are_refused_with_the_trail_and_the_fix():
    message = _problem(_pair(west_sep="-"))
    assert "flows[0].separator, flows[1].separator: copies come back round the cycle east -> west -> east" in message
    assert "flows[0] (east->west, separator '.'), flows[1] (west->east, separator '-')" in message
    assert "'east.heartbeats' on west -> 'west-east.heartbeats' on east, and round again for ever" in message
    assert "fix: use one separator on every flow of the cycle east -> west -> east" in message


@pytest.mark.parametrize("data", [
    _pair(),  # MM2 reads `east.orders` by '.' on the way back: a cycle, not copied
    _pair(east_sep="-", west_sep="-"),
    _pair(west_sep="-", east_topics=["payments"], west_topics=["orders"]),  # nothing selected back
    _pair(west_sep="-", east_topics=["orders.*"], west_topics=["orders.*"]),  # `east.orders` is not `orders.*`
])
def test_flows_whose_copies_never_come_back_are_accepted(data):
    load_topology(data)


def test_a_regex_that_matches_the_copies_brings_them_back():
    message = _problem(_pair(west_sep="-", east_topics=[r".*orders"], west_topics=[r".*orders"]))
    assert "'orders' on east -> 'east.orders' on west -> 'west-east.orders' on east" in message


def test_a_copy_that_comes_back_once_is_refused_too():
    """west copies only `east.orders` back, and east does not select `west-east.orders`
    again: not endless, yet the copy lands on its origin cluster."""
    message = _problem(_pair(west_sep="-", east_topics=["orders"], west_topics=[r"east\.orders"]))
    assert "'orders' on east -> 'east.orders' on west -> 'west-east.orders' on east;" in message
    assert "round again" not in message


def test_a_longer_ring_with_one_odd_separator():
    data = {"clusters": {"a": {}, "b": {}, "c": {}},
            "flows": [{"source": "a", "target": "b"}, {"source": "b", "target": "c"},
                      {"source": "c", "target": "a", "separator": "_"}]}
    assert "copies come back round the cycle a -> b -> c -> a" in _problem(data)
    data["flows"][2]["separator"] = "."
    load_topology(data)


def test_identity_cycles_keep_their_own_message():
    message = _problem(_pair(flows=[]) | {"flows": [
        {"source": "east", "target": "west", "replication_policy": "identity"},
        {"source": "west", "target": "east", "replication_policy": "identity"}]})
    assert "identity policy on the cycle east -> west -> east" in message
    assert "copies come back" not in message


def test_cycles_and_walks_directly():
    topology = load_topology(_pair())
    assert simple_cycles(topology.flows) == [("east", "west")]
    assert returning_copy(topology.flows, ("east", "west")) is None


@pytest.mark.parametrize("pattern, some", [(".*", "a"), (".*orders", "orders"), (r"orders\.v[0-9]+", "orders.v0"),
                                           ("x{3,5}", "xxx"), (r"us\..*", "us.a")])
def test_examples_of_a_regex_match_it(pattern, some):
    import re
    found = examples(pattern)
    assert some in found and all(re.fullmatch(pattern, name) for name in found)
