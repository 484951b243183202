"""Push placement, external Connect clusters, connector names and take-over:
the model's rules, the connector configs they lead to, and (under Pulumi
mocks) what the Connect workers and the MirrorMaker 2 resources receive."""
from __future__ import annotations

import json
import re

import pytest

from mirrorstack.mirror.connectors import (mirror_connector_configs, override_allowlist, take_over_names,
                                      throughput_settings, topics_exclude)
from mirrorstack.mm2.connectors import OWNER_KEY
from mirrorstack.model.spec import TopologyError, load_topology
from mirrorstack.model.rules import secret_problems
from tests.support.pulumi_mocks import RecordingMocks, build_local


def problems(data: dict) -> list[str]:
    with pytest.raises(TopologyError) as info:
        load_topology(data)
    return info.value.problems


def at(found: list[str], path: str) -> list[str]:
    """The problems reported at exactly this field path."""
    return [p for p in found if p.startswith(f"{path}: ")]


# ---------------------------------------------------------------- push placement

PLACED = {"clusters": {"edge": {}, "core": {}}, "flows": [{"source": "edge", "target": "core", "connect": "mm2"}]}


def placed(**connect) -> dict:
    return {**PLACED, "connect": {"mm2": {"kafka": "edge", **connect}}}


def test_a_flow_on_connect_away_from_its_target_is_refused_naming_push_as_the_fix():
    [found] = problems(placed())
    assert found.startswith("flows[0].connect: Connect cluster 'mm2' runs on 'edge' (connect.mm2.kafka), not on "
                            "this flow's target 'core'")
    assert found.endswith("fix: run the flow on a Connect cluster whose kafka is 'core', or set connect.mm2.push: true")


def test_push_true_accepts_it_without_a_warning():
    t = load_topology(placed(push=True))
    assert t.connect["mm2"].push is True and t.flows[0].connect == "mm2"
    assert t.warnings == []


def test_remote_target_still_works_with_exactly_one_deprecation_warning():
    t = load_topology(placed(remote_target=True))
    assert t.connect["mm2"].push is True
    assert t.warnings == [
        "mirrorstack:topology: `remote_target` is deprecated; fix: rename it to `push` (same meaning)"]
    # The warning belongs to that load only: the next load of a current file has none.
    assert load_topology(placed(push=True)).warnings == []


def test_remote_target_false_keeps_the_placement_rule():
    found = problems(placed(remote_target=False))
    assert at(found, "flows[0].connect") and "connect.mm2.push: true" in found[0]


def test_remote_target_and_push_together_are_refused():
    for push in (True, False):
        found = problems(placed(push=push, remote_target=True))
        assert any("remote_target is the old name of push; fix: remove remote_target" in p for p in found), found
        assert all(p.startswith("connect.mm2") for p in found), found


# ---------------------------------------------------------------- external Connect rules

URLS = ["https://connect-1:8083", "https://connect-2:8083"]


def external(ext: dict | None = None, clusters: dict | None = None, flow: dict | None = None, **connect) -> dict:
    return {"clusters": clusters or {"us": {}, "central": {}},
            "connect": {"ext": {"kafka": "central", "external": {"urls": URLS, **(ext or {})}, **connect}},
            "flows": [{"source": "us", "target": "central", "connect": "ext", **(flow or {})}]}


def test_a_minimal_external_connect_cluster_loads():
    t = load_topology(external())
    cc = t.connect["ext"]
    assert cc.is_external and cc.external.urls == URLS and t.flows[0].connect == "ext"


@pytest.mark.parametrize("field, value", [
    ("workers", 2), ("settings", {"offset.flush.interval.ms": "1000"}), ("rest_auth", True), ("group_id", "mm2"),
])
def test_worker_fields_on_an_external_connect_cluster_are_refused(field, value):
    [found] = problems(external(**{field: value}))
    assert found == (f"connect.ext.{field}: an external Connect cluster's workers are not managed by the stack; "
                     "fix: remove it (set it where the workers are deployed)")


def test_all_worker_fields_on_an_external_connect_cluster_are_reported_together():
    found = problems(external(workers=3, settings={"a": "b"}, rest_auth=True, group_id="g"))
    assert [p.split(":")[0] for p in found] == [
        "connect.ext.workers", "connect.ext.settings", "connect.ext.rest_auth", "connect.ext.group_id"]


def test_a_loaded_topology_with_external_connect_validates_again_unchanged():
    t = load_topology(external())
    assert load_topology(t.model_dump()) == t


def test_ca_file_without_an_https_url_is_refused():
    [found] = problems(external({"urls": ["http://connect-1:8083"], "ca_file": "/etc/ssl/connect-ca.pem"}))
    assert found == ("connect.ext.external.ca_file: no https:// URL to check it against; "
                     "fix: use https:// URLs, or remove ca_file")
    assert load_topology(external({"ca_file": "/etc/ssl/connect-ca.pem"})).connect["ext"].external.ca_file


@pytest.mark.parametrize("url", ["http://connect-1:8083", "https://connect-1", "https://10.0.0.7:8083/",
                                 "http://connect.example.com:80"])
def test_http_and_https_urls_with_an_optional_port_are_accepted(url):
    assert load_topology(external({"urls": [url]})).connect["ext"].external.urls == [url]


@pytest.mark.parametrize("url", ["connect-1:8083", "ftp://connect-1:8083", "https://", "https://:8083"])
def test_urls_that_are_no_http_url_are_refused(url):
    found = problems(external({"urls": ["https://connect-0:8083", url]}))
    assert at(found, "connect.ext.external.urls[1]") and "fix: match the pattern" in found[0], found


@pytest.mark.parametrize("url", ["https://connect-1:8083/connectors", "https://connect-1:8083 and more",
                                 "see https://connect-1:8083", "https://connect-1:123456", "https://connect 1:8083",
                                 "https://connect-1:port"])
def test_urls_with_more_than_scheme_host_and_port_are_refused(url):
    found = problems(external({"urls": [url]}))
    assert at(found, "connect.ext.external.urls[0]"), found


def test_no_urls_is_refused():
    found = problems(external({"urls": []}))
    assert at(found, "connect.ext.external.urls"), found


def test_secret_references_for_an_unknown_alias_are_refused():
    refs = {"eu": {"ssl.truststore.location": "/etc/kafka/eu-ca.pem"}}
    [found] = problems(external({"secret_references": refs}))
    assert found == "connect.ext.external.secret_references.eu: unknown cluster 'eu'; fix: use one of central, us"


@pytest.mark.parametrize("value", [
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="mm2" password="pw";',
    "${file:/etc/kafka/us.properties:sasl.jaas.config} trailing",
    "plain-${file:/etc/kafka/us.properties:sasl.jaas.config}",
])
def test_a_plaintext_secret_in_secret_references_is_refused(value):
    refs = {"us": {"sasl.jaas.config": value}}
    [found] = problems(external({"secret_references": refs}))
    assert found.startswith('connect.ext.external.secret_references.us["sasl.jaas.config"]: not a config provider '
                            "reference")
    assert 'fix: write a reference the workers resolve, e.g. "${file:/etc/kafka/secrets/us.properties:' \
           'sasl.jaas.config}"' in found
    assert "pw" not in found.replace("password", "")  # the value itself is never echoed


def test_provider_references_and_non_secret_paths_in_secret_references_are_accepted():
    refs = {"us": {"sasl.jaas.config": "${file:/etc/kafka/secrets/us.properties:sasl.jaas.config}",
                   "ssl.keystore.password": "${vault:secret/kafka/us:keystore}",
                   "ssl.truststore.location": "/etc/kafka/us-ca.pem"}}
    t = load_topology(external({"secret_references": refs}))
    assert t.connect["ext"].external.secret_references == refs


# ------------------------------------------------ secret_problems (clusterSecrets / connectSecrets keys)

def test_a_rest_username_needs_a_connect_secrets_password():
    t = load_topology(external({"username": "admin"}))
    assert secret_problems(t, {}, {}) == [
        "mirrorstack:connectSecrets.ext.password: required with connect.ext.external.username; fix: "
        "`pulumi config set --secret --path 'mirrorstack:connectSecrets.ext.password' <password>`"]
    assert secret_problems(t, {}, None) == secret_problems(t, {}, {})
    assert secret_problems(t, {}, {"ext": {"password"}}) == []


def test_a_connect_secrets_password_needs_a_username():
    t = load_topology(external())
    [found] = secret_problems(t, {}, {"ext": {"password"}})
    assert found.startswith("mirrorstack:connectSecrets.ext.password: without connect.ext.external.username; fix:")


@pytest.mark.parametrize("name", ["nope", "central"])
def test_connect_secrets_for_an_unknown_or_deployed_connect_cluster_are_refused(name):
    data = external()
    data["clusters"]["edge"] = {}
    data["flows"].append({"source": "us", "target": "edge"})  # `edge`: a deployed Connect cluster
    data["connect"]["central"] = {"kafka": "central"}
    data["flows"].append({"source": "edge", "target": "central", "connect": "central"})
    t = load_topology(data)
    [found] = secret_problems(t, {}, {name: {"password"}})
    assert found.startswith(f"mirrorstack:connectSecrets.{name}: no external Connect cluster {name!r}; "
                            "fix: use one of ext ")
    assert f"pulumi config rm --path 'mirrorstack:connectSecrets.{name}'" in found


def test_connect_secrets_without_any_external_connect_cluster_say_so():
    t = load_topology({"clusters": {"us": {}, "central": {}}, "flows": [{"source": "us", "target": "central"}]})
    [found] = secret_problems(t, {}, {"central": {"password"}})
    assert "fix: use one of none (no external Connect cluster)" in found


SASL_US = {"us": {"security": {"protocol": "SASL_SSL"}}, "central": {}}
US_REFS = {"ssl.truststore.location": "/etc/kafka/us-ca.pem",
           "sasl.jaas.config": "${file:/etc/kafka/secrets/us.properties:sasl.jaas.config}"}


def test_a_secured_deployed_cluster_needs_secret_references_on_external_workers():
    t = load_topology(external(clusters=SASL_US))
    [found] = secret_problems(t, {}, {})
    assert found.startswith("connect.ext.external.secret_references.us: the workers of 'ext' cannot read "
                            "ssl.truststore.location, sasl.jaas.config of 'us' from files mirrorstack writes on its "
                            "own hosts; fix:")
    assert '"sasl.jaas.config": "${file:/etc/kafka/secrets/us.properties:sasl.jaas.config}"' in found


def test_only_the_missing_secret_references_are_named():
    refs = {"us": {"ssl.truststore.location": US_REFS["ssl.truststore.location"]}}
    t = load_topology(external({"secret_references": refs}, clusters=SASL_US))
    [found] = secret_problems(t, {}, {})
    assert "cannot read sasl.jaas.config of 'us'" in found and "ssl.truststore.location" not in found.split("fix:")[0]


def test_given_secret_references_satisfy_the_check():
    t = load_topology(external({"secret_references": {"us": US_REFS}}, clusters=SASL_US))
    assert secret_problems(t, {}, {}) == []


def test_an_mtls_cluster_needs_its_keystore_referenced_too():
    clusters = {"us": {"security": {"protocol": "SSL", "mtls": True}}, "central": {}}
    [found] = secret_problems(load_topology(external(clusters=clusters)), {}, {})
    assert "cannot read ssl.truststore.location, ssl.keystore.location of 'us'" in found


def test_an_external_clusters_secrets_need_references_on_external_workers():
    clusters = {"us": {"external": {"bootstrap_servers": "b:9092", "security": {
        "protocol": "SASL_SSL", "username": "mm2"}}}, "central": {}}
    t = load_topology(external(clusters=clusters))
    [found] = secret_problems(t, {"us": {"password"}}, {})
    assert found.startswith("connect.ext.external.secret_references.us: the workers of 'ext' cannot read "
                            "sasl.jaas.config of 'us'")
    refs = {"us": {"sasl.jaas.config": US_REFS["sasl.jaas.config"]}}
    assert secret_problems(load_topology(external({"secret_references": refs}, clusters=clusters)),
                           {"us": {"password"}}, {}) == []


def test_a_deployed_connect_cluster_needs_no_secret_references():
    t = load_topology({"clusters": SASL_US, "flows": [{"source": "us", "target": "central"}]})
    assert secret_problems(t, {}, {}) == []


# ---------------------------------------------------------------- connector names and take-over

TWO = {"clusters": {"us": {}, "uk": {}, "central": {}}}


def two_flows(first: dict | None = None, second: dict | None = None) -> dict:
    return {**TWO, "flows": [{"source": "us", "target": "central", **(first or {})},
                             {"source": "uk", "target": "central", **(second or {})}]}


def test_two_flows_with_the_same_connector_name_on_one_connect_cluster_are_refused():
    names = {"connector_names": {"source": "mm2-msc"}}
    [found] = problems(two_flows(names, names))
    assert found == ("flows[1].connector_names: connector 'mm2-msc' is also flows[0]'s on Connect cluster 'central'; "
                     "fix: give each flow its own names")


def test_a_custom_name_equal_to_another_flows_default_name_is_refused():
    found = problems(two_flows(second={"connector_names": {"source": "us->central.MirrorSourceConnector"}}))
    assert at(found, "flows[1].connector_names"), found


def test_the_same_connector_name_on_different_connect_clusters_is_accepted():
    data = two_flows({"connector_names": {"source": "mm2-msc"}}, {"connector_names": {"source": "mm2-msc"}})
    data["flows"][1]["target"] = "us"
    t = load_topology(data)
    assert [f.connector_name("source") for f in t.flows] == ["mm2-msc", "mm2-msc"]
    assert [f.connect for f in t.flows] == ["central", "us"]


@pytest.mark.parametrize("names", [{"source": "mm2-us", "checkpoint": "mm2-us"},
                                   {"source": "us->central.MirrorHeartbeatConnector"}])
def test_two_kinds_of_one_flow_with_the_same_name_are_refused(names):
    found = problems({"clusters": {"us": {}, "central": {}},
                      "flows": [{"source": "us", "target": "central", "connector_names": names}]})
    assert at(found, "flows[0].connector_names"), found


def test_take_over_of_the_flows_own_connector_name_is_refused_pointing_at_connector_names():
    [found] = problems(two_flows({"take_over": {"source": "us->central.MirrorSourceConnector"}}))
    assert found == ("flows[0].take_over.source: 'us->central.MirrorSourceConnector' is this flow's own source "
                     "connector name; fix: to keep the name, move it to flows[0].connector_names.source "
                     "(adopted in place)")
    [kept] = problems(two_flows({"connector_names": {"checkpoint": "mm2-cpc"}, "take_over": {"checkpoint": "mm2-cpc"}}))
    assert kept.startswith("flows[0].take_over.checkpoint: 'mm2-cpc' is this flow's own checkpoint connector name")


def test_take_over_of_another_flows_connector_is_refused():
    [found] = problems(two_flows(second={"take_over": {"source": "us->central.MirrorSourceConnector"}}))
    assert found == ("flows[1].take_over.source: 'us->central.MirrorSourceConnector' is a connector of a flow of "
                     "this stack; fix: name a connector made by hand")
    [custom] = problems(two_flows({"connector_names": {"heartbeat": "mm2-hbc"}},
                                  {"take_over": {"heartbeat": "mm2-hbc"}}))
    assert custom.startswith("flows[1].take_over.heartbeat: 'mm2-hbc' is a connector of a flow of this stack")


def test_take_over_of_a_hand_made_connector_is_accepted():
    t = load_topology(two_flows({"take_over": {"source": "mm2-msc-us", "checkpoint": "mm2-cpc-us"}}))
    assert t.flows[0].take_over.by_kind() == {"source": "mm2-msc-us", "checkpoint": "mm2-cpc-us"}


def test_connector_name_is_the_given_one_or_mirrorstacks():
    t = load_topology(two_flows({"connector_names": {"source": "mm2-msc-us"}}))
    us, uk = t.flows
    assert us.connector_name("source") == "mm2-msc-us"
    assert us.connector_name("checkpoint") == "us->central.MirrorCheckpointConnector"
    assert us.connector_name("heartbeat") == "us->central.MirrorHeartbeatConnector"
    assert uk.connector_name("source") == "uk->central.MirrorSourceConnector"
    configs = mirror_connector_configs(us.description(), replication_factor=1, source_bootstrap="us:9092",
                                       target_bootstrap="c:9092")
    assert list(configs) == ["mm2-msc-us", "us->central.MirrorCheckpointConnector",
                             "us->central.MirrorHeartbeatConnector"]


def test_take_over_names_map_old_to_new_and_blank_for_a_kind_not_run():
    t = load_topology(two_flows({"heartbeats": False, "connector_names": {"checkpoint": "mm2-cpc"}, "take_over": {
        "source": "old-msc", "checkpoint": "old-cpc", "heartbeat": "old-hbc"}}))
    us, uk = t.flows
    assert take_over_names(us.description()) == {"old-msc": "us->central.MirrorSourceConnector", "old-cpc": "mm2-cpc",
                                   "old-hbc": ""}
    assert take_over_names(uk.description()) == {}


# ---------------------------------------------------------------- connector configs

def flow_of(**flow):
    t = load_topology({"clusters": {"edge": {}, "core": {}}, "connect": {"mm2": {"kafka": "edge", "push": True}},
                       "flows": [{"source": "edge", "target": "core", "connect": "mm2", **flow}]})
    return t.flows[0].description()


TARGET_CLIENT = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                 "sasl.jaas.config": "${file:/clients/core/client.properties:sasl.jaas.config}",
                 "ssl.truststore.location": "/clients/core/ca.pem"}


def configs_of(flow, **kw):
    return mirror_connector_configs(flow, replication_factor=1, source_bootstrap="edge:9092",
                                    target_bootstrap="core-1:9093,core-2:9093", target_client=TARGET_CLIENT, **kw)


def test_push_overrides_the_producer_of_every_connector_with_the_target():
    configs = configs_of(flow_of(), push=True)
    assert len(configs) == 3
    tuning = throughput_settings(flow_of())  # the source connector's speed settings, not the placement's
    for name, config in configs.items():
        overrides = {k: v for k, v in config.items() if k.startswith("producer.override.") and k not in tuning}
        assert overrides == {"producer.override.bootstrap.servers": "core-1:9093,core-2:9093",
                             **{f"producer.override.{k}": v for k, v in TARGET_CLIENT.items()}}, name
        assert config["producer.override.sasl.jaas.config"].startswith("${file:")  # a reference, never a value


def test_pull_overrides_nothing_but_the_source_connectors_tuning():
    tuning = throughput_settings(flow_of())
    for config in configs_of(flow_of(), push=False).values():
        assert not [k for k in config if ".override." in k and k not in tuning]
    assert override_allowlist(configs_of(flow_of())) == sorted(
        k.removeprefix("producer.override.") for k in tuning if k.startswith("producer.override."))


def test_exactly_once_push_keeps_source_offsets_in_a_topic_on_the_target_for_the_source_only():
    configs = configs_of(flow_of(exactly_once=True), push=True, offsets_topic="mirrorstack-s-mm2-offsets")
    source, checkpoint, heartbeat = configs.values()
    assert source["offsets.storage.topic"] == "mirrorstack-s-mm2-offsets"
    assert source["exactly.once.support"] == "required"
    assert "offsets.storage.topic" not in checkpoint and "offsets.storage.topic" not in heartbeat
    pulled = configs_of(flow_of(exactly_once=True), push=False, offsets_topic="mirrorstack-s-mm2-offsets")
    assert all("offsets.storage.topic" not in c for c in pulled.values())
    assert all("offsets.storage.topic" not in c for c in configs_of(flow_of(), push=True,
                                                                      offsets_topic="x-offsets").values())


def test_owner_key_marks_every_connector_of_the_stack():
    owned = configs_of(flow_of(), owner="prod")
    assert OWNER_KEY == "mirrorstack.stack"
    assert all(c[OWNER_KEY] == "prod" for c in owned.values())
    assert all(OWNER_KEY not in c for c in configs_of(flow_of()).values())


MM2_TOPICS_DEFAULTS = [r".*[\-\.]internal", r".*\.replica", r"__.*"]


def test_topics_exclude_starts_with_the_defaults_and_appends_the_flows():
    source = configs_of(flow_of(topics_exclude=["tmp-.*", "scratch"]))["edge->core.MirrorSourceConnector"]
    excluded = source["topics.exclude"].split(",")
    assert excluded[:3] == MM2_TOPICS_DEFAULTS
    assert any("connect" in p for p in excluded[3:-2]) and any("mirrorstack" in p for p in excluded[3:-2])
    assert excluded[-2:] == ["tmp-.*", "scratch"]
    plain = configs_of(flow_of())["edge->core.MirrorSourceConnector"]["topics.exclude"].split(",")
    assert excluded[:-2] == plain
    assert topics_exclude(flow_of(topics_exclude=[r"__.*"])) == plain  # a repeated default is listed once


def test_groups_exclude_starts_with_the_defaults_and_appends_the_flows():
    checkpoint = configs_of(flow_of(groups_exclude=["batch-.*"]))["edge->core.MirrorCheckpointConnector"]
    assert checkpoint["groups.exclude"].split(",") == [r"console-consumer-.*", r"connect-.*", r"__.*", "batch-.*"]
    plain = configs_of(flow_of())["edge->core.MirrorCheckpointConnector"]["groups.exclude"]
    assert plain == r"console-consumer-.*,connect-.*,__.*"


@pytest.mark.parametrize("topic, excluded", [
    ("mirrorstack-aggregation-central-configs", True),
    ("mirrorstack-central-offsets", True),
    ("connect-offsets", True),
    ("connect-configs", True),
    ("connect-cluster-status", True),
    ("my-connect-cluster-offsets", True),
    ("mm2-offset-syncs.central.internal", True),
    ("us.checkpoints.internal", True),
    ("__consumer_offsets", True),
    ("orders", False),
    ("connect-orders", False),
    ("us.orders", False),
])
def test_a_catch_all_flow_never_replicates_internal_or_connect_storage_topics(topic, excluded):
    patterns = topics_exclude(flow_of())
    for p in patterns:
        re.compile(p)  # Java and Python agree on these
    assert any(re.fullmatch(p, topic) for p in patterns) is excluded


def test_override_allowlist_strips_the_override_prefixes():
    configs = {"a": {"producer.override.bootstrap.servers": "x", "producer.override.acks": "all", "tasks.max": "1"},
               "b": {"consumer.override.isolation.level": "read_committed", "admin.override.acks": "1"}}
    assert override_allowlist(configs) == ["acks", "bootstrap.servers", "isolation.level"]
    pushed = override_allowlist(configs_of(flow_of(), push=True))
    tuning = [k.removeprefix("producer.override.") for k in throughput_settings(flow_of())
              if k.startswith("producer.override.")]
    assert pushed == sorted(["bootstrap.servers", *TARGET_CLIENT, *tuning])


# ---------------------------------------------------------------- under Pulumi mocks

def service(mocks, name: str) -> dict:
    [inputs] = [r.inputs for r in mocks.resources if r.name == name]
    return inputs


def worker_properties(mocks, worker: str) -> dict[str, str]:
    text = service(mocks, worker)["files"]["worker.properties"]
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


PUSH_AND_PULL = {
    "clusters": {"edge": {}, "core": {"security": {"protocol": "SASL_SSL"}}, "dc": {}},
    "connect": {"out": {"kafka": "edge", "push": True}},
    "flows": [{"source": "edge", "target": "core", "connect": "out"}, {"source": "edge", "target": "dc"}],
}


@pytest.fixture(scope="module")
def push_run(tmp_path_factory):
    return build_local(tmp_path_factory.mktemp("push"), PUSH_AND_PULL)


def test_push_workers_allow_exactly_the_target_client_overrides(push_run):
    mocks, _ = push_run
    props = worker_properties(mocks, "connect-out-0")
    assert props["connector.client.config.override.policy"] == "Allowlist"
    allowed = props["connector.client.config.override.allowlist"].split(",")
    assert {"bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.jaas.config",
            "ssl.truststore.location"} <= set(allowed)
    connectors = service(mocks, "edge->core-connectors")["connectors"]
    assert sorted(allowed) == override_allowlist(connectors)  # no more, no less than the connectors override


def test_pull_only_workers_keep_kafkas_default_override_policy(push_run):
    mocks, _ = push_run
    text = service(mocks, "connect-dc-0")["files"]["worker.properties"]
    assert "connector.client.config.override" not in text


def test_push_connectors_produce_to_the_target_with_file_references(push_run):
    mocks, _ = push_run
    connectors = service(mocks, "edge->core-connectors")["connectors"]
    assert len(connectors) == 3
    for config in connectors.values():
        assert config["producer.override.bootstrap.servers"] == config["target.cluster.bootstrap.servers"]
        assert config["producer.override.security.protocol"] == "SASL_SSL"
        assert re.fullmatch(r"\$\{file:.+:sasl\.jaas\.config\}", config["producer.override.sasl.jaas.config"])
        assert config[OWNER_KEY] == "edge"
    pulled = service(mocks, "edge->dc-connectors")["connectors"]
    assert all("producer.override.bootstrap.servers" not in c and "producer.override.security.protocol" not in c
               for c in pulled.values())  # a pulled flow's producer stays on the workers' own Kafka


def test_a_plaintext_push_target_allows_bootstrap_servers(tmp_path):
    data = {"clusters": {"edge": {}, "core": {}}, "connect": {"out": {"kafka": "edge", "push": True}},
            "flows": [{"source": "edge", "target": "core", "connect": "out"}]}
    mocks, _ = build_local(tmp_path, data)
    props = worker_properties(mocks, "connect-out-0")
    assert props["connector.client.config.override.policy"] == "Allowlist"
    allowed = props["connector.client.config.override.allowlist"].split(",")
    assert "bootstrap.servers" in allowed
    assert sorted(allowed) == override_allowlist(service(mocks, "edge->core-connectors")["connectors"])


EXTERNAL = {
    "clusters": {"us": {"security": {"protocol": "SASL_SSL"}}, "central": {}},
    "connect": {"ext": {"kafka": "central", "external": {
        "urls": URLS, "ca_file": "/etc/ssl/connect-ca.pem",
        "secret_references": {"us": {**US_REFS, "ssl.truststore.type": "PEM"}}}}},
    "flows": [{"source": "us", "target": "central", "connect": "ext"}],
}


@pytest.fixture(scope="module")
def external_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ext")
    return (folder, *build_local(folder, EXTERNAL, history=True))


def test_external_connect_runs_no_worker(external_run):
    _, mocks, out = external_run
    assert not [r.name for r in mocks.resources if r.name.startswith("connect-")]
    assert out["connect"] == {"ext": URLS[0]}
    # No group id of workers the stack does not run (Output.all() of no outputs resolves to []).
    assert out["groups"] in ({}, [])


def test_external_connect_mm2_inputs_name_every_url_and_the_connect_cluster(external_run):
    _, mocks, _ = external_run
    mm2 = service(mocks, "us->central-connectors")
    assert mm2["connect_url"] == URLS[0]
    assert mm2["connect_urls"] == URLS
    assert mm2["connect"] == "ext"
    assert mm2["connect_ca_file"] == "/etc/ssl/connect-ca.pem"
    assert mm2.get("secrets_digest") is None  # no file of ours to rotate on foreign workers


def test_external_connect_connectors_use_the_secret_references(external_run):
    folder, mocks, _ = external_run
    connectors = service(mocks, "us->central-connectors")["connectors"]
    assert len(connectors) == 3
    for config in connectors.values():
        assert config["source.cluster.sasl.jaas.config"] == US_REFS["sasl.jaas.config"]
        assert config["source.cluster.ssl.truststore.location"] == US_REFS["ssl.truststore.location"]
        assert config["source.cluster.security.protocol"] == "SASL_SSL"
        assert str(folder.resolve()) not in json.dumps(config)  # no path on mirrorstack's own hosts


def test_group_id_defaults_to_the_stack_and_name_when_the_stack_reference_has_no_outputs(tmp_path):
    data = {"clusters": {"us": {}, "central": {}}, "flows": [{"source": "us", "target": "central"}]}
    mocks, out = build_local(tmp_path, data, stack="edge", history=True)
    [ref] = [r for r in mocks.resources if r.typ == "pulumi:pulumi:StackReference"]
    assert ref.inputs["name"].endswith("/mirrorstack/edge")  # the stack's own last deployment
    props = worker_properties(mocks, "connect-central-0")
    assert props["group.id"] == "mirrorstack-edge-central"
    assert props["offset.storage.topic"] == "mirrorstack-edge-central-offsets"
    assert out["groups"] == {"central": "mirrorstack-edge-central"}


def test_an_explicit_group_id_wins_over_history(tmp_path):
    data = {"clusters": {"us": {}, "central": {}},
            "connect": {"central": {"kafka": "central", "group_id": "legacy-mm2"}},
            "flows": [{"source": "us", "target": "central"}]}
    mocks, out = build_local(tmp_path, data, history=True, mocks=HistoryMocks({"connect_groups": {"central": "other"}}))
    assert worker_properties(mocks, "connect-central-0")["group.id"] == "legacy-mm2"
    assert out["groups"] == {"central": "legacy-mm2"}


class HistoryMocks(RecordingMocks):
    """The stack's own last deployment exported `outputs`."""

    def __init__(self, outputs: dict):
        super().__init__()
        self.outputs = outputs

    def new_resource(self, args):
        if args.typ == "pulumi:pulumi:StackReference":
            self.resources.append(args)
            return [args.name + "_id", {"name": args.inputs["name"], "outputs": self.outputs}]
        return super().new_resource(args)


@pytest.mark.parametrize("outputs, group", [
    ({"connect_groups": {"central": "mirrorstack-older-central"}, "connect": {"central": "http://x"}},
     "mirrorstack-older-central"),
    ({"connect": {"central": "http://127.0.0.1:8083"}}, "mirrorstack-central"),  # deployed before group ids
    ({"connect_groups": {}, "connect": {"central": "http://127.0.0.1:8083"}}, "mirrorstack-edge-central"),
])
def test_group_id_follows_the_last_deployment(tmp_path, outputs, group):
    data = {"clusters": {"us": {}, "central": {}}, "flows": [{"source": "us", "target": "central"}]}
    mocks, out = build_local(tmp_path, data, history=True, mocks=HistoryMocks(outputs))
    assert worker_properties(mocks, "connect-central-0")["group.id"] == group
    assert out["groups"] == {"central": group}
