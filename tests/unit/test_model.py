import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mirrorstack.model import spec as model

from mirrorstack.model import rules as model_rules
from mirrorstack.model.paths import field_path
from mirrorstack.model.spec import TopologyError, load_topology, topology_json_schema

AGGREGATION = yaml.safe_load("""
platform: local
clusters:
  us: {brokers: 1}
  uk: {brokers: 1}
  central: {brokers: 2, settings: {num.partitions: "3"}}
flows:
  - {source: us, target: central, topics: ["orders.*", "payments"], replication_policy: identity}
  - {source: uk, target: central, replication_policy: identity, tasks_max: 4}
""")


def with_changes(base: dict, *changes) -> dict:
    """A deep copy of `base` with (path, value) changes; path like 'flows/1/target'."""
    data = copy.deepcopy(base)
    for path, value in changes:
        *parents, last = [int(p) if p.isdigit() else p for p in path.split("/")]
        node = data
        for p in parents:
            node = node[p]
        node[last] = value
    return data


def problems(data: dict) -> list[str]:
    with pytest.raises(TopologyError) as info:
        load_topology(data)
    return info.value.problems


def test_aggregation_loads_with_defaults_filled():
    t = load_topology(AGGREGATION)
    assert t.platform == "local"
    assert list(t.connect) == ["central"]
    assert t.connect["central"].kafka == "central" and t.connect["central"].workers == 1
    assert [f.connect for f in t.flows] == ["central", "central"]
    assert t.flows_by_connect() == {"central": t.flows}
    us, uk = t.flows
    assert us.name == "us->central"
    assert t.target_brokers(us) == 2 and t.replication_factor(us) == 2  # min(3, 2)
    assert us.tasks_max == 2 and uk.tasks_max == 4
    assert us.topics == ["orders.*", "payments"] and uk.topics == [".*"]
    assert t.remote_topic(us, "orders") == "orders"
    assert t.clusters["central"].settings == {"num.partitions": "3"}
    assert not t.clusters["us"].is_external


def test_default_policy_prefixes_remote_topics_and_rf_caps_at_three():
    t = load_topology({
        "clusters": {"dc1": {"brokers": 5}, "dc2": {"brokers": 5}},
        "flows": [{"source": "dc1", "target": "dc2", "separator": "_"}],
    })
    assert t.remote_topic(t.flows[0], "orders") == "dc1_orders"
    assert t.replication_factor(t.flows[0]) == 3


def test_explicit_connect_cluster_and_external_cluster_defaults():
    t = load_topology({
        "clusters": {
            "legacy": {"external": {"bootstrap_servers": "10.0.0.5:9092, 10.0.0.6:9092",
                                    "security": {"protocol": "SASL_SSL", "mechanism": "PLAIN", "username": "mirror"}}},
            "new": {"brokers": 3},
        },
        "connect": {"mm2": {"kafka": "new", "workers": 2}},
        "flows": [{"source": "legacy", "target": "new", "connect": "mm2", "replication_factor": 3}],
    })
    legacy = t.clusters["legacy"]
    assert legacy.is_external and legacy.brokers == 3
    assert legacy.external.security.protocol == "SASL_SSL"
    assert (legacy.external.security.mechanism, legacy.external.security.username) == ("PLAIN", "mirror")
    assert list(t.connect) == ["mm2"] and t.flows[0].connect == "mm2"
    assert t.flows_by_connect() == {"mm2": t.flows}


def test_defaults_are_not_shared_between_instances():
    t = load_topology(AGGREGATION)
    t.flows[0].overrides.source["x"] = "1"
    t.flows[0].topics_exclude.append("y")
    assert t.flows[1].overrides.source == {} and t.flows[1].topics_exclude == []


def test_loaded_topology_validates_again_unchanged():
    t = load_topology(AGGREGATION)
    assert load_topology(t.model_dump()) == t


CYCLE = {"clusters": {"a": {}, "b": {}, "c": {}}}
RULES = {
    "unknown flow source": (
        with_changes(AGGREGATION, ("flows/1/source", "ukk")),
        ["flows[1].source", "'ukk'", "central, uk, us"]),
    "unknown flow target": (
        with_changes(AGGREGATION, ("flows/1/target", "centrl")),
        ["flows[1].target", "'centrl'", "fix: use one of central, uk, us"]),
    "unknown connect kafka": (
        with_changes(AGGREGATION, ("connect", {"central": {"kafka": "centrl"}})),
        ["connect.central.kafka", "'centrl'", "fix: use one of central, uk, us"]),
    "unknown flow connect": (
        with_changes(AGGREGATION, ("flows/0/connect", "mm2")),
        ["flows[0].connect", "'mm2'", "fix: use one of central", "define it under connect"]),
    "self flow": (
        with_changes(AGGREGATION, ("flows/0/target", "us")),
        ["flows[0].target", "same as the source 'us'", "fix: replicate to a different cluster"]),
    "duplicate flow": (
        with_changes(AGGREGATION, ("flows/1/source", "us")),
        ["flows[1]: duplicate of flows[0]", "us->central", "fix: merge them"]),
    "alias with a dot": (
        with_changes(AGGREGATION, ("clusters/us.east", {}), ("flows/0/source", "us.east")),
        ['clusters["us.east"]', "cannot appear in a topic name", "fix:", "no dots"]),
    "alias too long": (
        with_changes(AGGREGATION, ("clusters/" + "x" * 101, {})),
        [f"clusters.{'x' * 101}: alias", "at most 100"]),
    "alias contains the separator": (
        with_changes(AGGREGATION, ("clusters/us-east", {}), ("flows/0/source", "us-east"), ("flows/0/separator", "-")),
        ["flows[0].source", "'us-east'", "separator '-'", "fix: choose another separator"]),
    "replication factor above target brokers": (
        with_changes(AGGREGATION, ("flows/0/replication_factor", 3)),
        ["flows[0].replication_factor", "3 is more than the 2 broker(s) of 'central'", "fix: set it to at most 2"]),
    "override replication factor above target brokers": (
        with_changes(AGGREGATION, ("flows/0/overrides", {"checkpoint": {"checkpoints.topic.replication.factor": "3"}})),
        ['flows[0].overrides.checkpoint["checkpoints.topic.replication.factor"]', "fix: set it to at most 2"]),
    "override replication factor not a number": (
        with_changes(AGGREGATION, ("flows/0/overrides", {"source": {"replication.factor": "three"}})),
        ['flows[0].overrides.source["replication.factor"]', "not an integer", "fix:"]),
    "regex does not compile": (
        with_changes(AGGREGATION, ("flows/0/topics", ["orders", "(payments"])),
        ["flows[0].topics[1]", "'(payments'", "missing ), unterminated subpattern", "fix: correct the regex"]),
    "exclude regex does not compile": (
        with_changes(AGGREGATION, ("flows/1/groups_exclude", ["[a-"])),
        ["flows[1].groups_exclude[0]", "'[a-'", "does not compile", "fix:"]),
    "regex with a comma": (
        with_changes(AGGREGATION, ("flows/0/groups", ["g{1,3}"])),
        ["flows[0].groups[0]", "contains ','", "fix: split it"]),
    "identity on a cycle": (
        {**CYCLE, "flows": [{"source": "a", "target": "b", "replication_policy": "identity"},
                            {"source": "b", "target": "a"}]},
        ["flows[0].replication_policy", "cycle a -> b -> a", "flows[0] (a->b, identity)", "flows[1] (b->a, default)",
         "fix: use `replication_policy: default` on every flow of this cycle, or break the cycle"]),
    "offset sync without checkpoints": (
        with_changes(AGGREGATION, ("flows/0/checkpoints", False), ("flows/0/sync_group_offsets", True)),
        ["flows[0].sync_group_offsets", "checkpoint connector", "fix: set checkpoints: true"]),
    "unused connect cluster": (
        with_changes(AGGREGATION, ("connect", {"spare": {"kafka": "central"}})),
        ["connect.spare", "no flow uses", "fix: remove it or set `connect: spare` on a flow"]),
    "settings on an external cluster": (
        with_changes(AGGREGATION, ("clusters/us", {"external": {"bootstrap_servers": "h:9092"},
                                                   "settings": {"a": "b"}})),
        ["clusters.us.settings", "only apply to deployed clusters", "fix: remove them"]),
    "wrong type": (
        with_changes(AGGREGATION, ("clusters/us/brokers", "two")),
        ["clusters.us.brokers", "valid integer", "'two'", "fix: write a whole number >= 1 (at most 9)"]),
    "brokers out of range": (
        with_changes(AGGREGATION, ("clusters/us/brokers", 10)),
        ["clusters.us.brokers", "less than or equal to 9", "fix: use a whole number >= 1 (at most 9)"]),
    "unknown key": (
        with_changes(AGGREGATION, ("flows/0/topic", ["x"])),
        ["flows[0].topic", "unknown key", "fix: did you mean 'topics'?", "allowed keys here are"]),
    "unknown nested key": (
        with_changes(AGGREGATION, ("clusters/us", {"external": {"bootstrap_servers": "h:9092", "securty": {}}})),
        ["clusters.us.external.securty", "fix: did you mean 'security'?"]),
    "missing flows": (
        {"clusters": {"us": {}}},
        ["flows: required", "fix: add it"]),
    "no flows": (
        {"clusters": {"us": {}}, "flows": []},
        ["flows:", "at least 1", "fix: add at least 1 entry"]),
    "number in settings": (
        with_changes(AGGREGATION, ("clusters/central/settings", {"num.partitions": 3})),
        ['clusters.central.settings["num.partitions"]', 'must be a string; fix: quote it in YAML, e.g. "3"']),
    "bool in overrides": (
        with_changes(AGGREGATION, ("flows/0/overrides", {"source": {"emit.offset-syncs.enabled": False}})),
        ['flows[0].overrides.source["emit.offset-syncs.enabled"]', 'fix: quote it in YAML, e.g. "false"']),
    "bad bootstrap servers": (
        with_changes(AGGREGATION, ("clusters/us", {"external": {"bootstrap_servers": "h1:9092,h2"}})),
        ["clusters.us.external.bootstrap_servers", "'h2' is not host:port", "fix: write e.g."]),
    "unknown policy": (
        with_changes(AGGREGATION, ("flows/0/replication_policy", "Identity")),
        ["flows[0].replication_policy", "'default' or 'identity'",
         "fix: use one of 'default', 'identity' (case matters: 'identity')"]),
    "string where a boolean belongs": (
        with_changes(AGGREGATION, ("flows/0/heartbeats", "yes")),
        ["flows[0].heartbeats", "valid boolean", "(got 'yes')", "fix: write true or false without quotes, e.g. true"]),
    "string where an integer belongs": (
        with_changes(AGGREGATION, ("connect", {"central": {"kafka": "central", "workers": "2"}})),
        ["connect.central.workers", "valid integer", "(got '2')", "fix: write a whole number", "e.g. 2"]),
    "number where a string belongs": (
        with_changes(AGGREGATION, ("clusters/us", {"external": {"bootstrap_servers": "h:9092", "kafka_version": 3.4}})),
        ["clusters.us.external.kafka_version", "valid string", 'fix: quote it in YAML, e.g. "3.4"']),
    "pattern mismatch": (
        with_changes(AGGREGATION, ("validation", {"driver_memory": "1G"})),
        ["validation.driver_memory", "fix: match the pattern ^[1-9][0-9]*[kmgt]$, e.g. '1g'"]),
}


@pytest.mark.parametrize("data, expected", RULES.values(), ids=RULES.keys())
def test_each_rule_names_the_field_and_the_fix(data, expected):
    found = problems(data)
    assert len(found) == 1, found
    for text in expected:
        assert text in found[0]
    assert "; fix: " in found[0]


def test_a_missing_topology_is_named():
    assert problems(None) == [
        "mirrorstack:topology: Input should be a valid dictionary or instance of Topology (got None); "
        "fix: write a YAML mapping with at least the keys clusters, flows"]


def test_yaml_types_are_final_but_ints_pass_as_floats():
    # strict: Pulumi hands the stack file's ints and bools over as such
    t = load_topology({**AGGREGATION, "validation": {"wait_seconds": 60}})
    assert t.validation.wait_seconds == 60.0 and isinstance(t.validation.wait_seconds, float)
    for change in [("flows/0/heartbeats", "no"), ("flows/0/tasks_max", 4.0), ("flows/0/exactly_once", 1),
                   ("clusters/us/brokers", True)]:
        [found] = problems(with_changes(AGGREGATION, change))
        assert found.startswith(_path_of(change[0]) + ": Input should be a valid "), found
        assert "; fix: write " in found


def _path_of(change_path: str) -> str:
    """'flows/0/heartbeats' -> 'flows[0].heartbeats'."""
    return field_path(tuple(int(p) if p.isdigit() else p for p in change_path.split("/")))


def test_all_problems_are_reported_together():
    data = with_changes(
        AGGREGATION,
        ("flows/0/target", "us"),
        ("flows/1/topics", ["("]),
        ("flows/1/replication_factor", 5),
        ("connect", {"spare": {"kafka": "nowhere"}}),
    )
    found = problems(data)
    assert [p.split(":")[0] for p in found] == [
        "connect.spare.kafka", "connect.spare", "flows[0].target", "flows[1].topics[0]", "flows[1].replication_factor"]
    message = str(TopologyError(found))
    assert message.splitlines()[0] == "Invalid mirrorstack topology:"
    assert len(message.splitlines()) == 1 + len(found)


def test_all_type_errors_are_reported_together():
    data = with_changes(AGGREGATION, ("clusters/us/brokers", "two"), ("flows/0/topic", []), ("platform", "aws"))
    assert [p.split(":")[0] for p in problems(data)] == ["platform", "clusters.us.brokers", "flows[0].topic"]


def test_three_cycle_with_identity_is_named():
    data = {**CYCLE, "flows": [{"source": "b", "target": "c"}, {"source": "c", "target": "a"},
                               {"source": "a", "target": "b", "replication_policy": "identity"}]}
    [found] = problems(data)
    assert "cycle a -> b -> c -> a" in found
    assert found.startswith("flows[2].replication_policy:")
    assert "flows[2] (a->b, identity), flows[0] (b->c, default), flows[1] (c->a, default)" in found


def test_every_identity_cycle_is_reported():
    data = {**CYCLE, "flows": [{"source": "a", "target": "b", "replication_policy": "identity"},
                               {"source": "b", "target": "a"}, {"source": "b", "target": "c"},
                               {"source": "c", "target": "a"}, {"source": "c", "target": "b"}]}
    cycles = [p.split("cycle ")[1].split(" via")[0] for p in problems(data)]
    assert cycles == ["a -> b -> a", "a -> b -> c -> a"]  # b <-> c has no identity flow


def test_identity_cycle_report_is_capped_on_a_dense_mesh():
    names = [f"c{i}" for i in range(9)]
    flows = [{"source": s, "target": t, "replication_policy": "identity"} for s in names for t in names if s != t]
    found = problems({"clusters": {n: {} for n in names}, "flows": flows})
    assert len(found) == model_rules.MAX_CYCLES


def test_identity_aggregation_and_default_active_active_are_accepted():
    load_topology(AGGREGATION)
    load_topology({"clusters": {"us": {}, "uk": {}},
                   "flows": [{"source": "us", "target": "uk"}, {"source": "uk", "target": "us"}]})
    # identity into a chain without a way back is fine too
    load_topology({**CYCLE, "flows": [{"source": "a", "target": "b", "replication_policy": "identity"},
                                      {"source": "b", "target": "c", "replication_policy": "identity"}]})


def test_committed_json_schema_is_current():
    committed = model.SCHEMA_FILE.read_text()
    assert committed == model.render_json_schema(), "stale schema: run `make schema`"
    assert json.loads(committed) == topology_json_schema()


def test_json_schema_documents_every_field():
    schema = topology_json_schema()
    assert schema["$schema"].startswith("https://json-schema.org/") and "mirrorstack" in schema["title"]
    models = [schema, *schema["$defs"].values()]
    for m in models:
        assert m["additionalProperties"] is False
        for name, prop in m["properties"].items():
            assert prop.get("description"), f"{m['title']}.{name} has no description"


def test_model_does_not_import_pulumi():
    # The schema, the tests and tooling must work without the Pulumi engine.
    code = "import sys, mirrorstack.model.spec; assert not [m for m in sys.modules if m.split('.')[0] == 'pulumi']"
    subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[2], check=True, timeout=60)


def test_identity_merges_name_the_flows_merging_into_a_target():
    topology = load_topology({
        "clusters": {"us": {}, "uk": {}, "central": {}, "dr": {}},
        "flows": [{"source": "us", "target": "central", "replication_policy": "identity"},
                  {"source": "uk", "target": "central", "replication_policy": "identity"},
                  {"source": "central", "target": "dr"}]})
    assert topology.identity_merges() == {"central": ["us->central", "uk->central"]}


# ---------------------------------------------------------------- sources/targets shorthand

REGIONS = {"clusters": {"us": {}, "uk": {}, "central": {"brokers": 2}}}
SHARED = {"topics": ["orders"], "replication_policy": "identity", "tasks_max": 4}


def test_sources_shorthand_equals_the_explicit_flows():
    short = load_topology({**REGIONS, "flows": [{"sources": ["us", "uk"], "target": "central", **SHARED}]})
    explicit = load_topology({**REGIONS, "flows": [{"source": "us", "target": "central", **SHARED},
                                                   {"source": "uk", "target": "central", **SHARED}]})
    assert short.model_dump() == explicit.model_dump()
    assert [f.name for f in short.flows] == ["us->central", "uk->central"]
    short.flows[0].topics.append("x")  # expanded flows share values, not objects
    assert short.flows[1].topics == ["orders"]


def test_targets_shorthand_fans_out():
    t = load_topology({"clusters": {"hq": {}, "eu": {}, "us": {}, "apac": {}},
                       "flows": [{"source": "hq", "targets": ["eu", "us", "apac"], "topics": ["orders"]},
                                 {"source": "eu", "target": "hq"}]})
    assert [f.name for f in t.flows] == ["hq->eu", "hq->us", "hq->apac", "eu->hq"]
    assert [f.connect for f in t.flows] == ["eu", "us", "apac", "hq"]
    assert all(f.topics == ["orders"] for f in t.flows[:3])
    assert load_topology(t.model_dump()) == t  # the dump is the explicit form


SHORTHAND_RULES = {
    "unknown alias inside sources": (
        {**REGIONS, "flows": [{"sources": ["us", "ukk"], "target": "central"}]},
        ["flows[0].sources[1]: unknown cluster 'ukk'", "fix: use one of central, uk, us"]),
    "source and sources": (
        {**REGIONS, "flows": [{"source": "us", "sources": ["uk"], "target": "central"}]},
        ["flows[0].sources: give either source or sources, not both", "fix: remove source, or add it to sources"]),
    "target and targets": (
        {**REGIONS, "flows": [{"source": "us", "target": "central", "targets": ["uk"]}]},
        ["flows[0].targets: give either target or targets, not both", "fix: remove target"]),
    "both lists": (
        {**REGIONS, "flows": [{"sources": ["us"], "targets": ["central"]}]},
        ["flows[0].targets: sources and targets are both lists", "fix: keep one list"]),
    "sources not a list": (
        {**REGIONS, "flows": [{"sources": "us", "target": "central"}]},
        ["flows[0].sources: must be a non-empty list of cluster aliases (got 'us')",
         "fix: write e.g. `sources: [a, b]`", "or `source: a`"]),
    "empty targets": (
        {**REGIONS, "flows": [{"source": "us", "targets": []}]},
        ["flows[0].targets: must be a non-empty list", "fix:"]),
    "neither source nor sources": (
        {**REGIONS, "flows": [{"target": "central"}]},
        ["flows[0].source: required", "fix: add it, or `sources: [...]` for several clusters"]),
    "alias in sources of the wrong type": (
        {**REGIONS, "flows": [{"sources": ["us", 7], "target": "central"}]},
        ["flows[0].sources[1]: Input should be a valid string (got 7)"]),
    "target repeated in targets": (
        {**REGIONS, "flows": [{"source": "us", "targets": ["central", "us"]}]},
        ["flows[0].targets[1]: same as the source 'us'", "fix: replicate to a different cluster"]),
    "source repeated in sources": (
        {**REGIONS, "flows": [{"sources": ["central", "us"], "target": "central"}]},
        ["flows[0].sources[0]: same as the target 'central'"]),
    "duplicate inside sources": (
        {**REGIONS, "flows": [{"sources": ["us", "uk", "us"], "target": "central"}]},
        ["flows[0].sources[2]: duplicate of flows[0].sources[0] (both us->central)", "fix: merge them"]),
    "duplicate of an explicit flow": (
        {**REGIONS, "flows": [{"source": "uk", "target": "central"}, {"sources": ["us", "uk"], "target": "central"}]},
        ["flows[1].sources[1]: duplicate of flows[0] (both uk->central)"]),
    "shared field fails once": (
        {**REGIONS, "flows": [{"sources": ["us", "uk"], "target": "central", "topics": ["("]}]},
        ["flows[0].topics[0]: regex '(' does not compile"]),
    "shared type error fails once": (
        {**REGIONS, "flows": [{"sources": ["us", "uk"], "target": "central", "tasks_max": "many"}]},
        ["flows[0].tasks_max", "valid integer", "'many'"]),
    "unknown key in an expanded entry": (
        {**REGIONS, "flows": [{"sources": ["us", "uk"], "target": "central", "topic": ["x"]}]},
        ["flows[0].topic: unknown key", "fix: did you mean 'topics'?"]),
    "pair-specific rule names the alias": (
        {"clusters": {"hq": {"brokers": 3}, "eu": {"brokers": 3}, "us": {"brokers": 1}},
         "flows": [{"source": "hq", "targets": ["eu", "us"], "replication_factor": 3}]},
        ["flows[0].replication_factor: 3 is more than the 1 broker(s) of 'us'", "fix: set it to at most 1"]),
}


@pytest.mark.parametrize("data, expected", SHORTHAND_RULES.values(), ids=SHORTHAND_RULES.keys())
def test_each_shorthand_rule_names_the_stack_file_path_and_the_fix(data, expected):
    found = problems(data)
    assert len(found) == 1, found
    for text in expected:
        assert text in found[0]


def test_entries_after_an_expanded_one_keep_their_stack_file_index():
    data = {**REGIONS, "flows": [{"sources": ["us", "uk"], "target": "central"},
                                 {"source": "central", "target": "nowhere"},
                                 {"source": "central", "target": "us", "tasks_max": 0}]}
    assert [p.split(":")[0] for p in problems(data)] == ["flows[2].tasks_max"]  # type errors come first
    data["flows"][2]["tasks_max"] = 1
    assert [p.split(":")[0] for p in problems(data)] == ["flows[1].target"]


def test_identity_cycle_through_an_expanded_flow_names_its_list_item():
    data = {**CYCLE, "flows": [{"source": "a", "targets": ["c", "b"], "replication_policy": "identity"},
                               {"source": "b", "target": "a"}]}
    [found] = problems(data)
    assert found.startswith("flows[0].replication_policy: identity policy on the cycle a -> b -> a")
    assert "via flows[0].targets[1] (a->b, identity), flows[1] (b->a, default)" in found


def test_schema_describes_the_shorthand_and_remote_connect():
    schema = topology_json_schema()["$defs"]
    flow = schema["Flow"]
    assert {"sources", "targets"} <= flow["properties"].keys() and "required" not in flow
    assert flow["allOf"] == [{"oneOf": [{"required": ["source"]}, {"required": ["sources"]}]},
                             {"oneOf": [{"required": ["target"]}, {"required": ["targets"]}]}]
    assert flow["not"] == {"required": ["sources", "targets"]}
    assert schema["ConnectCluster"]["properties"]["push"]["default"] is False
    assert "remote_target" not in schema["ConnectCluster"]["properties"]  # the old key: accepted, not advertised
    assert "Pull, the default" in schema["ConnectCluster"]["properties"]["push"]["description"]


# ---------------------------------------------------------------- forwarding chains

CHAIN = {"clusters": {"edge": {}, "region": {}, "core": {}}}


def chain(first: dict, second: dict) -> dict:
    return {**CHAIN, "flows": [{"source": "edge", "target": "region", **first},
                               {"source": "region", "target": "core", **second}]}


def test_a_chain_that_drops_the_renamed_topic_is_named_with_the_fix():
    assert problems(chain({"topics": ["orders"]}, {"topics": ["orders"]})) == [
        "flows[1].topics: 'orders' arrives on region as 'edge.orders' (flows[0], default policy), which flows[1] "
        "does not replicate; fix: add \"edge\\\\.orders\" to flows[1].topics or use replication_policy: identity "
        "on flows[0] (or exclude it in flows[1].topics_exclude to stop it at region)"]


FORWARDING_RULES = {
    "escaped dot is a literal": (
        chain({"topics": ["app\\.orders"]}, {"topics": ["app\\..*"]}),
        ["flows[1].topics: 'app.orders' arrives on region as 'edge.app.orders'", '"edge\\\\.app\\\\.orders"']),
    "hyphenated literal": (
        chain({"topics": ["web-clicks"]}, {"topics": ["web-.*"]}),
        ["'web-clicks' arrives on region as 'edge.web-clicks'", 'fix: add "edge\\\\.web-clicks"']),
    "separator of the upstream flow": (
        chain({"topics": ["orders"], "separator": "_"}, {"topics": ["orders", "edge\\.orders"]}),
        ["as 'edge_orders'", 'add "edge_orders"']),
    "expanded upstream flow": (
        {**CHAIN, "flows": [{"source": "edge", "targets": ["core", "region"], "topics": ["orders"]},
                            {"source": "region", "target": "core", "topics": ["orders"]}]},
        ["flows[1].topics: 'orders' arrives on region as 'edge.orders' (flows[0].targets[1], default policy)"]),
}


@pytest.mark.parametrize("data, expected", FORWARDING_RULES.values(), ids=FORWARDING_RULES.keys())
def test_each_forwarding_rule_names_the_flow_and_the_fix(data, expected):
    found = problems(data)
    assert len(found) == 1, found
    for text in expected:
        assert text in found[0]


@pytest.mark.parametrize("first, second", [
    ({"topics": ["orders"]}, {"topics": ["edge\\.orders"]}),  # the forwarding stack: names the renamed topic
    ({"topics": ["orders"]}, {"topics": [".*"]}),  # forwards everything
    ({"topics": ["orders"], "replication_policy": "identity"}, {"topics": ["orders"]}),  # name kept
    ({"topics": ["orders.*"]}, {"topics": ["orders"]}),  # regex upstream: not checked
    ({"topics": ["orders"]}, {"topics": ["payments"]}),  # never meant to forward orders
    # an exclusion matching the renamed topic stops it at region on purpose
    ({"topics": ["orders"]}, {"topics": ["orders"], "topics_exclude": ["edge\\..*"]}),
    ({"topics": ["orders"]}, {"topics": [".*"], "topics_exclude": ["edge\\.orders.*", "x"]}),
    ({"topics": ["orders"], "topics_exclude": ["orders"]}, {"topics": ["orders"]}),  # not replicated upstream
], ids=["renamed", "everything", "identity", "regex-upstream", "unrelated", "excluded-downstream",
        "excluded-by-pattern", "excluded-upstream"])
def test_chains_that_forward_or_clearly_stop_are_accepted(first, second):
    load_topology(chain(first, second))


def test_active_active_is_not_a_chain():
    load_topology({"clusters": {"east": {}, "west": {}},
                   "flows": [{"source": "east", "target": "west", "topics": ["orders"]},
                             {"source": "west", "target": "east", "topics": ["orders"]}]})


def test_each_dropped_literal_is_reported():
    found = problems(chain({"topics": ["orders", "payments", "clicks.*"]}, {"topics": ["orders", "payments"]}))
    assert [p.split(" arrives")[0] for p in found] == ["flows[1].topics: 'orders'", "flows[1].topics: 'payments'"]


# ---------------------------------------------------------------- Connect placement

PLACED = {"clusters": {"legacy": {}, "new": {}}, "flows": [{"source": "legacy", "target": "new", "connect": "mm2"}]}


def test_connect_away_from_the_target_needs_opt_in():
    [found] = problems({**PLACED, "connect": {"mm2": {"kafka": "legacy"}}})
    assert found == (
        "flows[0].connect: Connect cluster 'mm2' runs on 'legacy' (connect.mm2.kafka), not on this flow's target "
        "'new', so it would produce every record across the network (push); fix: run the flow on a Connect cluster "
        "whose kafka is 'new', or set connect.mm2.push: true")


def test_connect_named_after_the_target_but_elsewhere_needs_opt_in_too():
    data = {"clusters": {"legacy": {}, "new": {}}, "connect": {"new": {"kafka": "legacy"}},
            "flows": [{"source": "legacy", "target": "new"}]}
    [found] = problems(data)
    assert found.startswith("flows[0].connect: Connect cluster 'new' runs on 'legacy' (connect.new.kafka)")


def test_push_opts_in_and_remote_target_still_works_with_a_deprecation():
    t = load_topology({**PLACED, "connect": {"mm2": {"kafka": "legacy", "push": True}}})
    assert t.flows[0].connect == "mm2" and t.connect["mm2"].push and t.warnings == []
    assert load_topology({**PLACED, "connect": {"mm2": {"kafka": "new"}}}).connect["mm2"].push is False
    old = load_topology({**PLACED, "connect": {"mm2": {"kafka": "legacy", "remote_target": True}}})
    assert old.connect["mm2"].push is True
    assert old.warnings == ["mirrorstack:topology: `remote_target` is deprecated; fix: rename it to `push` (same meaning)"]
    with pytest.raises(TopologyError, match="remote_target is the old name of push; fix: remove remote_target"):
        load_topology({**PLACED, "connect": {"mm2": {"kafka": "legacy", "push": True, "remote_target": True}}})
