"""The replication plan: its pure parts, selection (full-match regexes, MM2's and
Connect's excludes, cycles), remote names, what a change starts or stops, the
warnings, and the rendering a reviewer reads; and which clusters a preview asks
(not those the update creates)."""
from __future__ import annotations

import dataclasses

import pulumi
import pytest

from mirrorstack.mm2.flows import FlowDescription
from mirrorstack.plan import replication_plan as plan
from mirrorstack.plan.replication_plan import Live


def spec(**kw) -> FlowDescription:
    base = {"source": "us", "target": "central", "topics": ["orders.*"], "topics_exclude": [],
            "groups": [".*"], "groups_exclude": [], "replication_policy": "default", "separator": ".",
            "sync_topic_configs": True, "checkpoints": True}
    return FlowDescription.from_dict({**base, **kw}, name="us->central")


US = Live(topics=["orders", "orders-eu", "xorders", "__consumer_offsets", "orders.internal",
                  "mirrorstack-x-dev-offsets", "central.orders", "payments"],
          groups=["billing", "connect-mirror", "console-consumer-1"])


def test_selection_is_a_full_match_minus_mm2s_and_connects_excludes_and_cycles():
    assert plan.selected_topics(spec(topics=["orders.*", "mirrorstack.*", "central.*"]), US.topics) == \
        ["orders", "orders-eu"]  # not xorders (full match), not internal/storage topics, not back to central
    assert plan.selected_topics(spec(topics_exclude=["orders-.*"]), US.topics) == ["orders"]
    assert plan.selected_groups(spec(), US.groups) == ["billing"]
    assert plan.selected_groups(spec(checkpoints=False), US.groups) == []


def test_selection_knows_mm2s_internal_topics_under_the_flows_separator_and_carries_heartbeats():
    # what the other flow of an active/active pair with `_` leaves on this source
    live = ["orders", "mm2-offset-syncs_central_internal", "central_checkpoints_internal", "central_orders",
            "heartbeats", "orders_internal"]
    assert plan.selected_topics(spec(topics=[".*"], separator="_"), live) == ["heartbeats", "orders", "orders_internal"]
    # MM2 copies heartbeats whatever `topics` says
    assert plan.selected_topics(spec(separator="_"), live) == ["heartbeats", "orders", "orders_internal"]
    assert plan.remote_name(spec(separator="_"), "heartbeats") == "us_heartbeats"


def test_remote_names_follow_policy_and_separator():
    assert plan.remote_name(spec(separator="_"), "orders") == "us_orders"
    assert plan.remote_name(spec(replication_policy="identity"), "orders") == "orders"


def test_a_change_says_what_starts_and_stops_and_renders_aligned():
    old = {"us->central": spec(topics=["orders", "payments"])}
    new = {"us->central": spec(topics=["orders.*"], groups_exclude=["billing"])}
    text = plan.render(plan.build(new, old, {"us": US, "central": Live()}))
    assert text.splitlines() == [
        "replication plan",
        "  us->central",
        "      orders    -> us.orders",
        "    + orders-eu -> us.orders-eu  starts",
        "    - payments  -> us.payments   stops",
        "    groups: 0 mirrored (-billing)",
    ], text


@pytest.mark.parametrize("change, renamed", [({"separator": "_"}, "us_orders"),
                                              ({"replication_policy": "identity"}, "orders")])
def test_a_policy_or_separator_change_marks_each_topic_renamed_and_says_what_up_does(change, renamed):
    old = {"us->central": spec(topics=["orders"])}
    new = {"us->central": spec(topics=["orders"], **change)}
    (p,) = plan.build(new, old, {"us": US, "central": Live()})
    assert p.rows == [("~", "orders", renamed, "renamed from us.orders: copied again from the start; us.orders stays")]
    assert p.warnings == [plan.RENAME_WARNING]
    assert "copied again from their start" in plan.RENAME_WARNING
    (unchecked,) = plan.build(new, old, {"us": Live(error="down"), "central": Live()})
    assert unchecked.warnings[-1] == plan.RENAME_WARNING
    (same,) = plan.build(old, old, {"us": US, "central": Live()})
    assert plan.RENAME_WARNING not in same.warnings and [r[0] for r in same.rows] == [" "]


def test_a_rename_onto_a_name_kafka_counts_as_taken_warns_with_the_fix():
    old = {"us->central": spec(topics=["orders"])}
    new = {"us->central": spec(topics=["orders"], separator="_")}
    (p,) = plan.build(new, old, {"us": US, "central": Live(topics=["us.orders"])})
    assert p.warnings[0] == ("us_orders: collides with us.orders on central (Kafka treats '.' and '_' in topic names "
                             "alike): MM2 cannot create it and the copy stalls; up refuses the rename; fix: delete "
                             "us.orders first (once no consumer reads it), or choose a separator that does not swap '.' "
                             "and '_'")
    (dash,) = plan.build({"us->central": spec(topics=["orders"], separator="-")}, old,
                         {"us": US, "central": Live(topics=["us.orders"])})
    assert dash.warnings == [plan.RENAME_WARNING]


def test_a_regex_matching_nothing_warns():
    (p,) = plan.build({"f": spec(topics=["orders", "nope.*"])}, None, {"us": US, "central": Live()})
    assert p.warnings == ["topics 'nope.*' matches no topic on us"]
    (p,) = plan.build({"f": spec(topics=["nope"])}, None, {"us": US, "central": Live()})
    assert "selects no topic on us" in p.warnings
    (p,) = plan.build({"f": spec(topics=["orders", "payments"], topics_exclude=["pay.*"])}, None, {"us": US})
    assert p.warnings == ["topics 'payments' matches only excluded topics (payments)"]


def test_identity_merges_warn_about_other_producers_config_sync_and_long_names():
    eu = Live(topics=["orders", "x" * 250])
    live = {"us": US, "eu": eu, "central": Live(topics=["orders"])}
    specs = {"us->central": spec(topics=["orders", "x+"], replication_policy="identity"),
             "eu->central": spec(source="eu", topics=["orders", "x+"], replication_policy="identity")}
    us_plan, eu_plan = plan.build(specs, {}, live)  # both new flows
    assert ("+", "orders", "orders", "starts, merged with eu->central, exists on target") in us_plan.rows
    assert any("identity merge with sync_topic_configs on" in w for w in us_plan.warnings)
    assert any("exists on central and is not fed by this stack's flows" in w for w in us_plan.warnings)
    assert any("250 characters, over Kafka's 249" in w for w in eu_plan.warnings)
    # Fed by this stack last time: the merged topic is this stack's own, no warning about other producers.
    again = plan.build(specs, specs, live)
    assert not any("not fed by this stack" in w for p in again for w in p.warnings)
    quiet = {n: dataclasses.replace(s, sync_topic_configs=False) for n, s in specs.items()}
    assert not any("sync_topic_configs" in w for p in plan.build(quiet, specs, live) for w in p.warnings)


def test_an_unreachable_source_says_so_and_still_names_what_changed():
    old = {"f": spec(topics=["orders"])}
    (p,) = plan.build({"f": spec(topics=["orders", "payments"])}, old, {"us": Live(error="no answer")})
    text = plan.render([p])
    assert "? us: not reachable from here, plan not checked (no answer)" in text
    assert "! changed: topics (which topics that moves is not checked)" in text


def test_a_removed_flow_is_named():
    plans = plan.build({}, {"f": spec()}, {"us": US})
    assert plans[0].name == "f" and "removed" in plans[0].warnings[0]


def test_flow_spec_reads_the_model():
    from mirrorstack.model.spec import Flow
    s = plan.exported({"us->central": Flow(source="us", target="central", topics=["a"]).description()})["us->central"]
    assert s["topics"] == ["a"] and s["replication_policy"] == "default" and set(s) == {
        "source", "target", "topics", "topics_exclude", "groups", "groups_exclude", "replication_policy",
        "separator", "sync_topic_configs", "checkpoints", "compression"}
    # read back as the next preview reads it (exactly_once only where set)
    assert plan.previous({"us->central": s})["us->central"] == Flow(source="us", target="central",
                                                                     topics=["a"]).description()


def test_the_live_read_names_a_cluster_it_cannot_read():
    from mirrorstack.plan.live_topics import read_names
    assert read_names("127.0.0.1:1").error == "no answer from 127.0.0.1:1 within 5s"  # nothing listens on port 1
    missing = read_names("x:9093", {"security.protocol": "SASL_SSL",
                                    "sasl.jaas.config": "${file:/nonexistent/client.properties:sasl.jaas.config}"})
    assert missing.error.startswith("client settings not readable here: sasl.jaas.config: cannot read "
                                    "/nonexistent/client.properties") and missing.topics == []
    jks = read_names("x:9093", {"security.protocol": "SSL", "ssl.truststore.location": "/x.jks",
                                "ssl.truststore.type": "JKS"})
    assert jks.error == "SSL client settings with no librdkafka equivalent (e.g. a JKS store)"


def test_secured_client_settings_translate_to_librdkafka_without_showing_the_secret(tmp_path):
    from mirrorstack.plan.live_topics import librdkafka_settings
    props = tmp_path / "client.properties"
    props.write_text('sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                     'username="mm2" password="pa55-w0rd";\n')
    conf, why_not = librdkafka_settings("b:9093", {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tmp_path / "ca.pem"),
        "sasl.jaas.config": f"${{file:{props}:sasl.jaas.config}}"})
    assert why_not is None
    assert conf == {"bootstrap.servers": "b:9093", "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
                    "ssl.ca.location": str(tmp_path / "ca.pem"), "sasl.username": "mm2", "sasl.password": "pa55-w0rd"}
    _, bad = librdkafka_settings("b:9093", {"sasl.jaas.config": f"${{file:{props}:missing.key}}"})
    assert "pa55-w0rd" not in bad


def test_the_plan_warns_where_the_target_takes_smaller_batches_than_the_source():
    source = Live(topics=["orders", "big"], limits={"big": 4_000_000}, default_limit=1_048_588)
    small_target = Live(topics=["us.orders"], limits={"us.orders": 500_000}, default_limit=1_048_588)

    def warnings(target, **kw):
        return plan.build({"f": spec(topics=["orders", "big"], **kw)}, None, {"us": source, "central": target})[0].warnings

    # `big`'s 4 MB limit is copied by MM2 (sync_topic_configs); `orders` got a smaller one on the target
    assert warnings(small_target, exactly_once=True) == [
        "us.orders: takes batches up to 500000 bytes on central, orders up to 1048588 on us: a larger record "
        "stops the flow; fix: set max.message.bytes=1048588 on us.orders (or message.max.bytes on central's brokers)"]
    # at-least-once (issue 46): each restart re-writes what followed the refused record, which lands late
    assert warnings(small_target) == [
        "us.orders: takes batches up to 500000 bytes on central, orders up to 1048588 on us: a larger record "
        "stops the flow; until then each restart re-writes the records sent after the last committed offset "
        "(duplicates), and once it passes, the large record lands after records that followed it; "
        "fix: set max.message.bytes=1048588 on us.orders (or message.max.bytes on central's brokers)"]
    # without config sync the remote `us.big` gets the target brokers' default
    assert [w.split(":")[0] for w in warnings(Live(default_limit=1_048_588), sync_topic_configs=False)] == ["us.big"]
    # limits unknown (no right to describe configs): nothing is claimed
    assert warnings(Live()) == []
    assert warnings(Live(default_limit=1_048_588), compression="none")[-1].startswith("compression none: records go")


def test_a_separator_swapping_dot_and_underscore_collides_with_the_flows_own_old_topics():
    target = ["us.orders", "us.checkpoints.internal", "mm2-offset-syncs.us.internal", "other"]
    assert plan.rename_collisions(spec(separator="_"), ["orders", "payments"], target) == [
        ("us_orders", "us.orders"), ("us_checkpoints_internal", "us.checkpoints.internal"),
        ("mm2-offset-syncs_us_internal", "mm2-offset-syncs.us.internal")]
    assert plan.rename_collisions(spec(separator="-"), ["orders"], target) == []


def test_a_flow_from_a_cluster_this_update_creates_says_so_and_checks_nothing():
    created = Live.to_be_created()
    (p,) = plan.build({"us->central": spec()}, None, {"us": created, "central": created})
    assert plan.render([p]).splitlines() == [
        "replication plan", "  us->central", "    ? us, central: created by this update, nothing to check yet"]
    assert p.rows == [] and p.warnings == []
    # a new flow of an existing stack, its source new: no "not checked" warning either
    (p,) = plan.build({"us->central": spec()}, {}, {"us": created, "central": Live()})
    assert p.unchecked == "us: created by this update, nothing to check yet" and p.warnings == []


def test_a_flow_into_a_cluster_this_update_creates_gets_the_full_plan_of_its_source():
    (p,) = plan.build({"us->central": spec()}, {}, {"us": US, "central": Live.to_be_created()})
    assert p.unchecked is None
    assert p.rows == [("+", "orders", "us.orders", "starts"), ("+", "orders-eu", "us.orders-eu", "starts")]
    assert p.warnings == []  # an empty target: nothing there to collide with or merge into


def test_clusters_this_update_creates_are_not_asked_and_the_others_are_asked_at_once(monkeypatch):
    import threading
    from mirrorstack.plan import report
    both_asking = threading.Barrier(2, timeout=10)  # two reads one after the other would break it
    asked = []

    def read_names(bootstrap, client_settings=None):
        asked.append(bootstrap)
        both_asking.wait()
        return Live(topics=[bootstrap])
    monkeypatch.setattr(report, "read_names", read_names)
    live = report.read_clusters({"us": "us:9092", "eu": "eu:9092", "hq": "hq:9092"},
                                {"us": {}, "eu": {}, "hq": {}}, created=["hq"])
    assert sorted(asked) == ["eu:9092", "us:9092"]
    assert live == {"us": Live(topics=["us:9092"]), "eu": Live(topics=["eu:9092"]), "hq": Live.to_be_created()}
    assert report.read_clusters({"hq": "hq:9092"}, {"hq": {}}, created=["hq"]) == {"hq": Live.to_be_created()}


@pytest.mark.parametrize("outputs, new", [
    (None, ["hq", "eu"]),  # a stack never deployed: every cluster it deploys is new, never an external one
    ({}, ["hq", "eu"]),
    ({"clusters": {"hq": "127.0.0.1:9092"}, "connect": {}}, ["eu"]),
    ({"clusters": {"hq": "127.0.0.1:9092", "eu": "127.0.0.1:9093"}}, []),
    ({"connect": {"eu": "http://x"}}, []),  # outputs without `clusters`: cannot tell, so every cluster is asked
])
def test_the_clusters_new_to_the_stack_are_those_its_last_deployment_did_not_export(outputs, new):
    from mirrorstack.model.spec import load_topology
    from mirrorstack.stack_history import clusters_new_to_the_stack
    topology = load_topology({"clusters": {"hq": {}, "eu": {}, "old": {"external": {"bootstrap_servers": "k:9092"}}},
                              "flows": [{"source": "hq", "targets": ["eu", "old"], "topics": ["orders"]}]})
    assert clusters_new_to_the_stack(topology, outputs) == new


class _OwnStack(pulumi.runtime.Mocks):
    """The stack's own last deployment exported `outputs` ({}: never deployed)."""

    def __init__(self, outputs: dict):
        self.outputs = outputs

    def new_resource(self, args):
        if args.typ == "pulumi:pulumi:StackReference":
            return [args.name + "_id", {"name": args.inputs["name"], "outputs": self.outputs}]
        return [args.name + "_id", args.inputs]

    def call(self, args):
        return {}, None


@pytest.mark.parametrize("outputs, asked, plan_lines", [
    ({}, [], ["  hq->eu", "    ? hq, eu: created by this update, nothing to check yet",
              "  hq->us", "    ? hq, us: created by this update, nothing to check yet"]),
    ({"clusters": {"hq": "hq:9092", "eu": "eu:9092"}, "replication_plan": {}}, ["eu:9092", "hq:9092"],
     ["  hq->eu", "    + orders -> hq.orders  starts", "  hq->us", "    + orders -> hq.orders  starts"]),
])
def test_the_program_asks_only_the_clusters_its_last_deployment_had(monkeypatch, outputs, asked, plan_lines):
    """report_plan with stack_history.new_clusters, as __main__ wires them, under mocks."""
    from types import SimpleNamespace
    from mirrorstack.model.spec import load_topology
    from mirrorstack.plan import report
    from mirrorstack.stack_history import new_clusters, own_stack, previous_output
    topology = load_topology({"clusters": {"hq": {}, "eu": {}, "us": {}},
                              "flows": [{"source": "hq", "targets": ["eu", "us"], "topics": ["orders"]}]})
    reads, logged = [], []
    monkeypatch.setattr(report, "read_names", lambda bootstrap, settings: reads.append(bootstrap) or
                        Live(topics=["orders"] if bootstrap == "hq:9092" else []))
    monkeypatch.setattr(pulumi.log, "info", lambda message, resource=None: logged.append(message))
    pulumi.runtime.set_mocks(_OwnStack(outputs), project="mirrorstack", stack="fan", preview=True)

    @pulumi.runtime.test
    def program():
        own = own_stack("fan")
        clusters = {a: SimpleNamespace(bootstrap_servers=pulumi.Output.from_input(f"{a}:9092"), client_settings={})
                    for a in topology.clusters}
        report.report_plan(topology, clusters, previous_output(own, "replication_plan"), None,
                           created=new_clusters(own, topology))
        return pulumi.Output.from_input(None)
    program()
    assert sorted(reads) == asked
    assert logged[0].splitlines()[1:] == plan_lines
