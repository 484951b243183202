"""Pure logic of spark/validate_replication.py: input checks, remote-topic
naming and grouping, the MM2 Checkpoint byte format, pass/fail. No Spark."""
import json
import struct

import pytest

from mirrorstack.spark.cli import main
from mirrorstack.spark.config import hide_secrets
from mirrorstack.mm2.client_settings import jaas_login, librdkafka_config, read_properties
from mirrorstack.spark.config import BadInput, DEFAULT_TOLERANCE, parse_config, resolve_topics
from mirrorstack.mm2.flows import FlowSelection
from mirrorstack.mm2.records import decode_checkpoint_key, decode_checkpoint_value, encode_checkpoint
from mirrorstack.spark.reconcile import Validator
from mirrorstack.spark.report import group_failures, summary_text
from mirrorstack.spark.spark_io import (BATCH_FETCH_WAIT_MS, C1_ONLY, QUICK_JIT_BELOW, ROWS_PER_TASK, THROUGHPUT_GC,
                                        driver_java_options, read_kafka, tasks_for)

A, B, C = "127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"


def flow(**changes):
    return {"name": "us->central", "source_bootstrap": A, "target_bootstrap": C, "source_alias": "us",
            "topics": ["orders"], **changes}


def problems(data) -> list[str]:
    with pytest.raises(BadInput) as info:
        parse_config(data)
    return info.value.problems


def test_remote_topic_follows_the_policy():
    assert FlowSelection(source="us", target=None, policy="default", separator=".").remote("orders") == "us.orders"
    assert FlowSelection(source="us", target=None, policy="default", separator="_").remote("orders") == "us_orders"
    assert FlowSelection(source="us", target=None, policy="identity", separator=".").remote("orders") == "orders"


def test_defaults_and_tolerance():
    config = parse_config({"flows": [flow()]})
    assert config.wait_seconds == 120
    assert config.tolerance == {"missing": 0, "duplicates": 0, "extras": 0, "out_of_order": 0,
                                "in_flight": "wait-rate", "lost": 0, "purged": 0}
    [group] = config.groups
    assert (group.topic, group.target_bootstrap) == ("us.orders", C)
    assert parse_config({"flows": [flow()], "tolerance": {"extras": 3, "in_flight": 0}},
                            wait_override=5).tolerance["extras"] == 3
    # "unlimited" is null's spelling where nulls get dropped (Pulumi inputs)
    assert parse_config({"flows": [flow()], "tolerance": {"duplicates": "unlimited"}}).tolerance["duplicates"] is None
    assert parse_config({"flows": [flow()], "tolerance": {"in_flight": "unlimited"}}).tolerance["in_flight"] is None
    assert parse_config({"flows": [flow()], "tolerance": {"in_flight": "wait-rate"}}).tolerance["in_flight"] == \
        "wait-rate"


def test_identity_flows_into_one_target_topic_form_one_group():
    config = parse_config({"flows": [
        flow(name="us->central", policy="identity", topics=["orders", "clicks"]),
        flow(name="uk->central", source_bootstrap=B, source_alias="uk", policy="identity", topics=["orders"]),
        flow(name="uk->central-2", source_bootstrap=B, source_alias="uk", topics=["orders"])]})
    by_topic = {g.topic: [m.label for m in g.members] for g in config.groups}
    assert by_topic == {"orders": ["us->central:orders", "uk->central:orders"], "clicks": ["us->central:clicks"],
                        "uk.orders": ["uk->central-2:orders"]}
    assert [m.src for m in config.groups[0].members] == [0, 1]


def test_the_same_target_written_in_a_different_broker_order_is_one_group():
    config = parse_config({"flows": [
        flow(name="x", target_bootstrap=f"{B},{C}", policy="identity"),
        flow(name="y", source_bootstrap=B, target_bootstrap=f"{C}, {B}", source_alias="uk", policy="identity")]})
    assert len(config.groups) == 1


@pytest.mark.parametrize("data, expected", [
    ([], "config: must be a JSON object"),
    ({}, "flows: required"),
    ({"flows": [flow()], "wait": 3}, "wait: unknown field"),
    ({"flows": [flow(source_bootstrap=None)]}, "flows[0].source_bootstrap: required"),
    ({"flows": [flow(target_bootstrap="nohost")]}, "flows[0].target_bootstrap: 'nohost' is not host:port"),
    ({"flows": [flow(policy="mirror")]}, "flows[0].policy: 'mirror' is not one of default, identity"),
    ({"flows": [flow(source_alias=None)]}, "flows[0].source_alias: required with policy default"),
    ({"flows": [flow(topics=[])]}, "flows[0].topics: required"),
    ({"flows": [flow(topics=["ok", "bad topic"])]}, "flows[0].topics[1]: 'bad topic' is not a Kafka topic name"),
    ({"flows": [flow(source_client={"auto.offset.reset": "latest"})]},
     "flows[0].source_client.auto.offset.reset: not allowed"),
    ({"flows": [flow(source_client={"a": ["x"]})]}, "flows[0].source_client.a: must be a string"),
    ({"flows": [flow(groups=["app-.*"])]}, "flows[0].groups: needs checkpoints_topic"),
    ({"flows": [flow(groups=["(unclosed"], checkpoints_topic="us.checkpoints.internal")]},
     "flows[0].groups[0]: '(unclosed' is not a regex"),
    ({"flows": [flow(), flow()]}, "flows[*].name: 'us->central' is used by more than one flow"),
    ({"flows": [flow(extra=1)]}, "flows[0].extra: unknown field"),
    ({"flows": [flow()], "wait_seconds": -1}, "wait_seconds: must be a non-negative number"),
    ({"flows": [flow()], "tolerance": {"missing": -1}}, "tolerance.missing: must be a non-negative integer"),
    ({"flows": [flow()], "tolerance": {"typos": 1}}, "tolerance.typos: unknown"),
    ({"flows": [flow(name="a", policy="identity"), flow(name="b", policy="identity", target_client={"x": "1"})]},
     "flows[1].target_client: differs from flows[0].target_client"),
    ({"flows": [flow(name="a"), flow(name="b")]}, "flows[1].topics[0]: 'orders' from the same source already feeds"),
    ({"flows": [flow(name=f"f{i}", source_bootstrap=f"s{i}:9092", policy="identity") for i in range(257)]},
     "flows[256].topics[0]: 'orders' is one source topic too many for 'orders': one run checks at most 256"),
    ({"flows": [flow(topic_patterns=["o.*"])]}, "flows[0].topics: give topics or topic_patterns, not both"),
    ({"flows": [flow(topics=None, topic_patterns=["(o"])]}, "flows[0].topic_patterns[0]: '(o' is not a regex"),
    ({"flows": [flow(topics=None, topic_patterns=[])]}, "flows[0].topic_patterns: must be a non-empty list"),
    ({"flows": [flow(topics_exclude=["x"])]}, "flows[0].topics_exclude: only with topic_patterns"),
    ({"flows": [flow(topics=None, topic_patterns=[".*"], target_alias="a b")]}, "flows[0].target_alias: must be"),
    ({"flows": [flow(groups_required="no")]}, "flows[0].groups_required: must be true or false"),
])
def test_bad_input_names_the_field(data, expected):
    found = problems(data)
    assert any(p.startswith(expected) for p in found), found


def test_main_exits_2_on_bad_input_without_starting_spark(tmp_path, capsys):
    assert main(["--config-json", "{not json"]) == 2
    assert "--config-json: not JSON" in capsys.readouterr().err
    assert main(["--config", str(tmp_path / "missing.json")]) == 2
    assert "--config: cannot read" in capsys.readouterr().err
    assert main([]) == 2
    assert main(["--config-json", json.dumps({"flows": [flow(topics=None)]})]) == 2
    assert "flows[0].topics: required" in capsys.readouterr().err


def test_checkpoint_bytes_round_trip_in_kafkas_layout():
    key, value = encode_checkpoint("app", "us.orders", 3, 120, 57, "meta")
    assert key == b"\x00\x03app\x00\x09us.orders\x00\x00\x00\x03"
    assert value == struct.pack(">hqq", 0, 120, 57) + b"\x00\x04meta"
    assert decode_checkpoint_key(key) == ("app", "us.orders", 3)
    assert decode_checkpoint_value(value) == (120, 57, "meta")
    with pytest.raises(ValueError, match="version 1"):
        decode_checkpoint_value(struct.pack(">hqq", 1, 1, 1) + b"\x00\x00")


def test_librdkafka_translation_gives_up_on_java_only_settings():
    assert librdkafka_config(A, {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}) == \
        {"bootstrap.servers": A, "security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN"}
    assert librdkafka_config(A, {"sasl.jaas.config": "x"}) is None
    assert librdkafka_config(A, {"ssl.truststore.location": "/x.jks"}) is None


def _group(**changes):
    group = {"topic": "us.orders", "target_bootstrap": C, "partitions_ok": True, "target_partitions": 2,
             "sources": [{"flow": "us->central", "topic": "orders", "partitions": 2}],
             "missing": 0, "in_flight": 0, "duplicates": 0, "extras": 0, "out_of_order": 0, "failover": []}
    return {**group, **changes}


def test_failures_follow_the_tolerances():
    tol = dict(DEFAULT_TOLERANCE)
    assert group_failures(_group(in_flight=40), tol) == []
    assert group_failures(_group(in_flight=40, in_flight_bound=40), tol) == []
    assert group_failures(_group(in_flight=41, in_flight_bound=40, waited_seconds=3.2), tol) == [
        "us.orders on 127.0.0.1:9094: in_flight 41 > 40, what the target takes in another 3s wait at the rate "
        "it took records during this one; fix: find what slows the flow, raise wait_seconds, or set "
        "tolerance.in_flight"]
    assert group_failures(_group(in_flight=41, in_flight_bound=40), {**tol, "in_flight": 50}) == []
    assert group_failures(_group(in_flight=41, in_flight_bound=40), {**tol, "in_flight": None}) == []
    assert group_failures(_group(missing=7), tol) == ["us.orders on 127.0.0.1:9094: missing 7 > tolerance 0"]
    assert group_failures(_group(extras=3), {**tol, "extras": 3}) == []
    assert group_failures(_group(in_flight=1), {**tol, "in_flight": 0})
    assert "does not exist" in group_failures(_group(partitions_ok=False, target_partitions=None), tol)[0]
    assert "1 partitions, but us->central:orders has 2" in \
        group_failures(_group(partitions_ok=False, target_partitions=1), tol)[0]
    lost = {"flow": "f", "consumer_group": "app", "checkpoints_topic": "us.checkpoints.internal", "lost": 2}
    assert "would lose 2" in group_failures(_group(failover=[lost]), tol)[0]
    assert group_failures(_group(failover=[{**lost, "lost": 0}]), tol) == []
    none = {**lost, "lost": 0, "unmatched_regex": True}
    assert "have no checkpoint" in group_failures(_group(failover=[none]), tol)[0]


def patterned(**changes):
    return flow(**{"topics": None, "topic_patterns": ["orders", "clicks.*"], "target_alias": "central", **changes})


SOURCE_TOPICS = {"orders": 10, "clicks.eu": 4, "clicks.empty": 0, "payroll": 7, "__consumer_offsets": 50,
                 "mm2-offset-syncs.central.internal": 3, "clicks.checkpoints.internal": 2, "heartbeats": 9,
                 "clicks.heartbeats": 1, "clicks.replica": 1, "central.clicks.x": 5}


def test_topic_patterns_resolve_to_what_mm2_replicates_with_records():
    config = parse_config({"flows": [patterned(topic_patterns=[".*"], topics_exclude=["payroll"])]})
    assert config.has_patterns and config.groups == []
    asked = []
    resolved = resolve_topics(config, lambda b, c: asked.append((b, c)) or SOURCE_TOPICS, log=lambda m: None)
    # internal, heartbeats, *.replica, excluded, empty, and (default policy) the target's own topics are left out
    assert resolved.flows[0].topics == ("clicks.eu", "orders")
    assert [g.topic for g in resolved.groups] == ["us.clicks.eu", "us.orders"]
    assert asked == [(A, {})]


def test_topic_patterns_leave_out_mm2s_internal_topics_under_any_separator():
    """`_`: MM2 names its topics `mm2-offset-syncs_central_internal`, `central_checkpoints_internal`
    (an active/active pair's other flow writes them to this source); none is a user topic."""
    topics = {"orders": 3, "mm2-offset-syncs_central_internal": 2, "central_checkpoints_internal": 2,
              "heartbeats": 4, "central_heartbeats": 1, "central_orders": 3, "orders_v2": 1}
    config = parse_config({"flows": [patterned(topic_patterns=[".*"], separator="_")]})
    resolved = resolve_topics(config, lambda b, c: topics, log=lambda m: None)
    assert resolved.flows[0].topics == ("orders", "orders_v2")
    assert [g.topic for g in resolved.groups] == ["us_orders", "us_orders_v2"]


def test_topic_patterns_with_identity_merge_and_one_listing_per_source():
    config = parse_config({"flows": [
        patterned(name="us", policy="identity"),
        patterned(name="us-again", policy="identity", target_bootstrap=B),
        patterned(name="uk", source_bootstrap=B, source_alias="uk", policy="identity")]})
    calls = []

    def lister(bootstrap, client):
        calls.append(bootstrap)
        return {"orders": 3, "clicks.a": 1, "central.x": 1} if bootstrap == A else {"orders": 2}
    resolved = resolve_topics(config, lister, log=lambda m: None)
    assert calls == [A, B]  # the same source is listed once
    by_topic = {(g.target_bootstrap, g.topic): [m.label for m in g.members] for g in resolved.groups}
    assert by_topic == {(C, "clicks.a"): ["us:clicks.a"], (C, "orders"): ["us:orders", "uk:orders"],
                        (B, "clicks.a"): ["us-again:clicks.a"], (B, "orders"): ["us-again:orders"]}


def test_a_flow_matching_no_topic_is_kept_with_no_topics():
    config = parse_config({"flows": [patterned()]})
    resolved = resolve_topics(config, lambda b, c: {"other": 5}, log=lambda m: None)
    assert resolved.flows[0].topics == () and resolved.groups == []


def _run_selecting_nothing(**top):
    config = parse_config({"flows": [patterned()], **top})
    config = resolve_topics(config, lambda b, c: {"other": 5}, log=lambda m: None)
    return Validator(config, None, "kafka-client", 1.0, 5, log=lambda m: None).run({})


def test_a_run_that_selected_nothing_is_reported_as_such_not_passed():
    report = _run_selecting_nothing()
    assert (report["status"], report["passed"], report["exit_code"]) == ("nothing-checked", False, 0)
    assert (report["records_checked"], report["topics_checked"], report["failures"]) == (0, 0, [])
    assert report["window"] == {"seconds": None, "since": None, "since_ms": None}  # whole history by default
    assert summary_text(report).startswith("replication check NOTHING CHECKED: 0 record(s) of 0 topic(s) "
                                               "checked, whole history")


def test_min_records_fails_a_run_that_checked_fewer():
    report = _run_selecting_nothing(min_records=1, window_seconds=600)
    assert (report["status"], report["passed"], report["exit_code"]) == ("failed", False, 1)
    assert report["failures"] == ["checked 0 records, fewer than min_records 1"]
    assert report["window"]["seconds"] == 600 and report["window"]["since"].endswith("+00:00")
    assert "  FAIL checked 0 records, fewer than min_records 1" in summary_text(report)


@pytest.mark.parametrize("top, message", [
    ({"window_seconds": 0}, "window_seconds: must be a positive number"),
    ({"window_seconds": "1h"}, "window_seconds: must be a positive number"),
    ({"min_records": -3}, "min_records: must be a non-negative integer"),
])
def test_window_and_minimum_are_checked(top, message):
    with pytest.raises(BadInput) as info:
        parse_config({"flows": [flow()], **top})
    assert any(p.startswith(message) for p in info.value.problems), info.value.problems


def test_driver_memory_must_be_a_jvm_size(capsys):
    assert main(["--config-json", json.dumps({"flows": [flow()]}), "--driver-memory", "lots"]) == 2
    assert "--driver-memory: 'lots' is not a JVM size" in capsys.readouterr().err


def test_a_short_job_runs_its_driver_on_c1_and_the_users_options_come_last():
    from mirrorstack.spark.cli import parse_args
    plain = parse_args(["--config-json", "{}"])
    assert driver_java_options(plain, QUICK_JIT_BELOW - 1) == f"{THROUGHPUT_GC} {C1_ONLY}"
    assert driver_java_options(plain, QUICK_JIT_BELOW) == THROUGHPUT_GC  # a long job: C2 pays for itself
    assert driver_java_options(plain, None) == THROUGHPUT_GC  # size unknown before Spark (offsets read through Spark)
    own = parse_args(["--config-json", "{}", "--java-options=-XX:SharedArchiveFile=/a.jsa -XX:TieredStopAtLevel=4"])
    # the JVM takes the last of a repeated option: the user's override the job's choice
    assert driver_java_options(own, 10) == \
        f"{THROUGHPUT_GC} {C1_ONLY} -XX:SharedArchiveFile=/a.jsa -XX:TieredStopAtLevel=4"
    # a collector of the user's own: not a second one (the JVM would refuse to start)
    g1 = parse_args(["--config-json", "{}", "--java-options=-XX:+UseG1GC"])
    assert driver_java_options(g1, QUICK_JIT_BELOW) == "-XX:+UseG1GC"


def test_tasks_grow_with_rows_so_each_sort_stays_small():
    assert tasks_for(0) == 2 and tasks_for(ROWS_PER_TASK * 2) == 2
    assert tasks_for(20_000_000) == 20_000_000 // ROWS_PER_TASK


# ------------------------------------------------- ${file:...} references and librdkafka

SECRET = 's3cr=t:"pw"'
JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="mm2" password="s3cr=t:\\"pw\\"";'


def test_file_references_resolve_through_java_properties(tmp_path):
    from mirrorstack.properties import render_properties
    secrets = tmp_path / "client.properties"
    secrets.write_text(render_properties({"sasl.jaas.config": JAAS, "odd key=:": "tab\there é 🔑"}) +
                       "# comment=x\n! also\n  spaced : v1\nlong = first \\\n       second\\\\\n"
                       "escaped\\=key=\\u0041\\:\n")
    props = read_properties(str(secrets))
    assert props == {"sasl.jaas.config": JAAS, "odd key=:": "tab\there é 🔑", "spaced": "v1",
                     "long": "first second\\", "escaped=key": "A:"}
    config = parse_config({"flows": [flow(source_client={
        "security.protocol": "SASL_SSL", "sasl.jaas.config": f"${{file:{secrets}:sasl.jaas.config}}"})]})
    client = config.flows[0].source_client
    assert client["sasl.jaas.config"] == JAAS
    assert SECRET not in repr(config) and "pw" not in repr(client)  # reprs hide what a reference read


def test_a_missing_file_or_key_names_the_field_not_the_secret(tmp_path):
    secrets = tmp_path / "client.properties"
    secrets.write_text(f"sasl.jaas.config={JAAS}\nother={SECRET}\n")
    missing_file = problems({"flows": [flow(target_client={"sasl.jaas.config": f"${{file:{tmp_path}/nope:k}}"})]})
    assert missing_file[0].startswith(f"flows[0].target_client.sasl.jaas.config: cannot read {tmp_path}/nope")
    missing_key = problems({"flows": [flow(source_client={"sasl.jaas.config": f"${{file:{secrets}:sasl.jaas}}"})]})
    assert missing_key == [f"flows[0].source_client.sasl.jaas.config: {secrets} has no key 'sasl.jaas'"]
    secrets.write_text(f"sasl.jaas.config={JAAS}\nbad=\\u00zz {SECRET}\n")
    malformed = problems({"flows": [flow(source_client={"x": f"${{file:{secrets}:sasl.jaas.config}}"})]})
    assert malformed == [f"flows[0].source_client.x: {secrets} is not a valid Java properties file"]
    embedded = problems({"flows": [flow(source_client={"x": f"pre ${{file:{secrets}:bad}}"})]})
    assert "must be the whole value" in embedded[0]
    relative = problems({"flows": [flow(source_client={"x": "${file:client.properties:k}"})]})
    assert relative == ["flows[0].source_client.x: 'client.properties' in the ${file:...} reference is not an "
                        "absolute path"]
    for found in (missing_file, missing_key, malformed, embedded):
        assert not any(SECRET in p or "pw" in p for p in found), found


def test_errors_of_the_job_never_show_a_resolved_secret(tmp_path):
    secrets = tmp_path / "client.properties"
    secrets.write_text(f"sasl.jaas.config={JAAS.replace(chr(92), chr(92) * 2)}\n")
    reference = f"${{file:{secrets}:sasl.jaas.config}}"
    config = parse_config({"flows": [flow(source_client={"sasl.jaas.config": reference})]})
    assert config.flows[0].source_client["sasl.jaas.config"] == JAAS
    assert hide_secrets(f"bad login {JAAS} / password {SECRET}", config.flows) == "bad login <hidden> / password <hidden>"


def test_librdkafka_translation_of_pem_stores_and_jaas_logins():
    client = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "ssl.truststore.type": "PEM",
              "ssl.truststore.location": "/x/clients/us/ca.pem", "ssl.keystore.type": "PEM",
              "ssl.keystore.location": "/x/clients/us/client.pem", "sasl.jaas.config": JAAS,
              "isolation.level": "read_committed"}
    assert librdkafka_config(A, client) == {
        "bootstrap.servers": A, "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
        "ssl.ca.location": "/x/clients/us/ca.pem", "ssl.key.location": "/x/clients/us/client.pem",
        "ssl.certificate.location": "/x/clients/us/client.pem", "sasl.username": "mm2", "sasl.password": SECRET,
        "isolation.level": "read_committed"}
    plain = "org.apache.kafka.common.security.plain.PlainLoginModule REQUIRED\n  password = \"a\\\\b\" username=u"
    assert jaas_login(plain) == ("u", "a\\b")
    assert jaas_login(JAAS.replace(' password="', ' tokenauth="true" password="')) is None
    assert jaas_login("com.example.OtherLoginModule required username=\"u\" password=\"p\";") is None
    assert jaas_login(JAAS + " " + JAAS) is None
    for java_only in ({"ssl.truststore.location": "/t.jks"},  # JKS
                      {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": "-----BEGIN"},
                      {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem", "ssl.keystore.password": "x"},
                      {"sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                                           "required;"},
                      {"ssl.endpoint.identification.algorithm": ""}):
        assert librdkafka_config(A, java_only) is None, java_only


def test_isolation_level_reaches_spark_as_a_kafka_option():
    config = parse_config({"flows": [flow(target_client={"isolation.level": "read_committed"})]})
    assert config.groups[0].target_client == {"isolation.level": "read_committed"}
    options = _options_read(False, config.groups[0].target_client)
    assert options == {"kafka.bootstrap.servers": C, "kafka.fetch.max.wait.ms": BATCH_FETCH_WAIT_MS,
                       "kafka.isolation.level": "read_committed", "subscribe": "t"}


def _options_read(stream: bool, client: dict) -> dict:
    class Reader:
        def __init__(self):
            self.options = {}

        def format(self, _name):
            return self

        def option(self, key, value):
            self.options[key] = value
            return self

        def load(self):
            return self.options

    spark = type("Spark", (), {"read": Reader(), "readStream": Reader()})()
    return read_kafka(spark, C, client, stream=stream, subscribe="t")


def test_a_batch_read_waits_briefly_at_the_log_end_unless_the_client_says_otherwise():
    # a consumer's fetch ahead of its task sat at a partition's end for Kafka's whole 500 ms
    assert _options_read(False, {})["kafka.fetch.max.wait.ms"] == BATCH_FETCH_WAIT_MS == "10"
    assert _options_read(False, {"fetch.max.wait.ms": "250"})["kafka.fetch.max.wait.ms"] == "250"
    assert "kafka.fetch.max.wait.ms" not in _options_read(True, {})  # the continuous validator: Kafka's default


def test_exactly_once_flows_read_their_target_read_committed():
    from mirrorstack.validation.job_config import validation_job_config
    from mirrorstack.model.spec import load_topology
    topology = load_topology({
        "clusters": {"us": {}, "uk": {}, "eu": {}, "central": {}, "dr": {}},
        "flows": [{"source": "us", "target": "central", "replication_policy": "identity", "exactly_once": True},
                  {"source": "uk", "target": "central", "replication_policy": "identity"},
                  {"source": "us", "target": "dr", "exactly_once": True},
                  {"source": "eu", "target": "dr"}],
        "validation": {}})
    servers = {alias: f"{alias}:9092" for alias in topology.clusters}
    config = validation_job_config(topology, servers, {"central": {"security.protocol": "SSL"}})
    clients = {f["flow"]["name"]: f.get("target_client") for f in config["flows"]}
    committed = {"isolation.level": "read_committed"}
    assert clients == {"us->central": {"security.protocol": "SSL", **committed},
                       "uk->central": {"security.protocol": "SSL", **committed},  # merges into the same topics
                       "us->dr": committed, "eu->dr": None}
    parse_config(config)  # the job accepts it: one target client per merged group


def test_the_wait_is_over_only_when_every_partition_holds_its_window():
    from mirrorstack.spark.progress import partitions_behind
    expected = {0: 100, 1: 100}
    assert partitions_behind(expected, {0: 100, 1: 100}, 200) == 0
    # a source still taking records: partition 0 ran ahead with newer copies, 1 is behind
    assert partitions_behind(expected, {0: 180, 1: 60}, 240) == 40
    assert partitions_behind(expected, {0: 150, 1: 100}, 250) == 0  # more than the window: newer copies
    # a target with fewer partitions than its source: waited on the topic's total only
    assert partitions_behind({0: 100, 1: 100, 2: 50}, {0: 150, 1: 100}, 250) == 0
    assert partitions_behind({0: 100, 1: 100, 2: 50}, {0: 100, 1: 100}, 200) == 50


def test_the_wait_tells_moving_partitions_and_bounds_what_is_in_flight():
    from mirrorstack.spark.progress import WaitProgress, why
    progress = WaitProgress()
    progress.observe(0, {0: 100, 1: 50})
    progress.observe(0, {0: 110, 1: 50})
    progress.observe(0, {0: 130, 1: 50, 2: 4})  # a partition seen late: it took records
    assert progress.moving(0) == {0, 2} and progress.taken(0) == 34
    assert progress.in_flight_bound(0, waited=4.0, wait_seconds=4.0) == 34  # another wait at this rate
    assert progress.in_flight_bound(0, waited=2.0, wait_seconds=10.0) == 170
    still = WaitProgress()
    still.observe(1, {0: 5})
    still.observe(1, {0: 5})
    assert still.moving(1) == set() and still.in_flight_bound(1, waited=3.0, wait_seconds=3.0) == 0
    assert WaitProgress().in_flight_bound(7, waited=0.0, wait_seconds=60) == 0  # never observed
    assert "stuck" in why("stalled") and "on its way" in why("in_flight") and "not on its way" in why("missing")


class _BehindBroker:
    """A consumer whose broker answers UNKNOWN_TOPIC_OR_PART for a topic the metadata lists, `behind`
    times (a broker just restarted, its metadata not caught up), then the watermarks."""

    def __init__(self, behind: int, code=None):
        from confluent_kafka import KafkaError
        self.behind, self.code = behind, KafkaError.UNKNOWN_TOPIC_OR_PART if code is None else code
        self.asked = self.refreshed = 0

    def list_topics(self, topic, timeout):
        from types import SimpleNamespace
        self.refreshed += 1
        return SimpleNamespace(topics={topic: SimpleNamespace(error=None, partitions={0: None})})

    def get_watermark_offsets(self, tp, timeout, cached):
        from confluent_kafka import KafkaError, KafkaException
        self.asked += 1
        if self.asked <= self.behind:
            raise KafkaException(KafkaError(self.code))
        return (0, 7)


def test_a_broker_behind_on_metadata_is_asked_again_and_a_lasting_answer_is_raised(monkeypatch):
    from confluent_kafka import KafkaError, KafkaException
    from mirrorstack.mm2 import kafka_answers
    from mirrorstack.spark import offsets
    monkeypatch.setattr(kafka_answers.time, "sleep", lambda _s: None)
    for behind, code, expected in ((2, None, {0: (0, 7)}),
                                   (kafka_answers.ATTEMPTS, None, KafkaError.UNKNOWN_TOPIC_OR_PART),
                                   (1, KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED)):
        reader, consumer = offsets.KafkaClientOffsets(), _BehindBroker(behind, code)
        monkeypatch.setattr(reader, "_consumer", lambda _b, _c: consumer)
        if isinstance(expected, dict):
            assert reader.watermarks("b:9092", {}, "t") == expected
            assert consumer.refreshed == 1 + behind  # the leader looked up again before each new ask
        else:
            with pytest.raises(KafkaException) as raised:
                reader.watermarks("b:9092", {}, "t")
            assert raised.value.args[0].code() == expected
            assert consumer.asked == (behind if code is None else 1)  # a lasting refusal is not asked again


def test_a_group_coordinator_still_loading_is_asked_again(monkeypatch):
    """The side an unplanned switch left, just back: its group offsets answer COORDINATOR_LOAD_IN_PROGRESS a while."""
    from confluent_kafka import KafkaError, KafkaException
    from mirrorstack.mm2 import kafka_answers
    monkeypatch.setattr(kafka_answers.time, "sleep", lambda _s: None)
    answers = [KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE, None]

    def ask():
        code = answers.pop(0)
        if code is not None:
            raise KafkaException(KafkaError(code))
        return {"orders": 5}
    assert kafka_answers.asked_again(ask, lambda: None) == {"orders": 5} and answers == []
