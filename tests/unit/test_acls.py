"""Authorization: the ACLs derived from a topology (mirrorstack.kafka.acls),
the authorizer settings and the model's rules for `authorization` and
`principals`. The sets themselves were measured against a deny-by-default
cluster (tests/integration/test_secure_stack.py proves them)."""
import re

import pytest
import yaml

from mirrorstack.kafka.acls import Acl, AclSet, authorizer_settings, client_principal, connect_acls, external_plan, \
    external_principal, flow_acls, keyed, lines_of, principal_acls, resource_names, topology_acls
from mirrorstack.model.spec import ClientSecurity, TopologyError, load_topology
from mirrorstack.mm2.validation_reports import REPORT_TOPIC
from mirrorstack.model.users import NODE_PRINCIPAL, USER_NAME
from tests.support.stacks import REPO

SECURE = yaml.safe_load((REPO / "stacks" / "Pulumi.secure.yaml").read_text())["config"]["mirrorstack:topology"]


def _secure(**changes) -> dict:
    return {**SECURE, **changes}


def _lines(topology, *, group: str = "g", transactional: bool = False, validated: bool = False) -> dict[str, set]:
    sets = {alias: AclSet() for alias in topology.clusters if topology.authorizes(alias)}
    principals = {a: client_principal(a, topology.clusters[a].security) for a in sets}
    for flow in topology.flows:
        flow_acls(sets, flow.description(), principals=principals,
                  connect_kafka=topology.connect[flow.connect].kafka,
                  connect_group=group, transactional=transactional, validated=validated)
    return {alias: {Acl.parse(line)[0] for line in s.lines()} for alias, s in sets.items()}


def test_regexes_become_literal_prefixed_or_every_name():
    assert resource_names(["orders", r"orders\.v1", "orders.v2", "logs-.*", r"app\..*", ".*", "a|b", "[ab]x"]) == [
        ("LITERAL", "orders"), ("LITERAL", "orders.v1"), ("LITERAL", "orders.v2"), ("PREFIXED", "logs-"),
        ("PREFIXED", "app."), ("LITERAL", "*")]


def test_a_line_names_its_parts_and_reads_back():
    acls = AclSet()
    acls.allow("User:m", "TOPIC", [("LITERAL", "orders")], ["read"], "flow a->b: source read")
    acls.allow("User:m", "TOPIC", [("LITERAL", "orders")], ["read"], "flow a->b: validation")
    (line,) = acls.lines()
    assert line == "allow User:m READ on TOPIC orders (LITERAL) for flow a->b: source read, flow a->b: validation"
    assert Acl.parse(line) == (Acl("User:m", "TOPIC", "orders", "LITERAL", "READ"),
                               ["flow a->b: source read", "flow a->b: validation"])
    with pytest.raises(ValueError, match="not an ACL line"):
        Acl.parse("allow everything")


def test_mm2_reads_its_source_and_writes_only_its_target():
    topology = load_topology(_secure())
    acls = _lines(topology)
    mm2 = "User:mirrorstack"
    source_ops = {(a.operation, a.resource) for a in acls["edge"] if a.principal == mm2}
    assert not {op for op, _ in source_ops} & {"WRITE", "CREATE", "ALTER", "ALTER_CONFIGS", "DELETE"}
    assert Acl(mm2, "TOPIC", "orders", "LITERAL", "READ") in acls["edge"]
    assert Acl(mm2, "GROUP", "*", "LITERAL", "DESCRIBE") in acls["edge"]  # checkpoints: groups `.*`
    central = acls["central"]
    for topic in ("edge.orders", "edge.payments", "edge.heartbeats"):
        assert {Acl(mm2, "TOPIC", topic, "LITERAL", op) for op in ("CREATE", "WRITE", "DESCRIBE")} <= central
    for internal in ("mm2-offset-syncs.edge.internal", "edge.checkpoints.internal", "heartbeats"):
        assert Acl(mm2, "TOPIC", internal, "LITERAL", "WRITE") in central
    assert not any(a.resource == "TOPIC" and a.name in ("orders", "payments") for a in central)
    assert not any(a.resource == "TRANSACTIONAL_ID" for a in central)  # workers without exactly-once


def test_the_flows_options_decide_their_rights():
    flow = {**SECURE["flows"][0], "separator": "_", "topics": ["logs-.*"], "groups": ["billing"],
            "sync_topic_acls": True, "sync_group_offsets": True, "heartbeats": False}
    topology = load_topology(_secure(flows=[flow]))
    acls = _lines(topology, group="grp", transactional=True, validated=True)
    mm2 = "User:mirrorstack"
    assert Acl(mm2, "TOPIC", "logs-", "PREFIXED", "READ") in acls["edge"]
    assert Acl(mm2, "TOPIC", "edge_logs-", "PREFIXED", "WRITE") in acls["central"]  # the separator
    assert Acl(mm2, "TOPIC", "mm2-offset-syncs_edge_internal", "LITERAL", "WRITE") in acls["central"]
    assert Acl(mm2, "CLUSTER", "kafka-cluster", "LITERAL", "DESCRIBE") in acls["edge"]  # ACL sync reads
    assert Acl(mm2, "CLUSTER", "kafka-cluster", "LITERAL", "ALTER") in acls["central"]  # and writes
    assert Acl(mm2, "GROUP", "billing", "LITERAL", "READ") in acls["central"]  # offsets written for the group
    assert Acl(mm2, "TOPIC", "edge_logs-", "PREFIXED", "READ") in acls["central"]  # validation, group offsets
    assert not any(a.name == "heartbeats" and a.operation == "CREATE" for a in acls["central"])
    tx = {a.name for a in acls["central"] if a.resource == "TRANSACTIONAL_ID"}
    assert tx == {"grp-edge->central.MirrorSourceConnector-", "grp-edge->central.MirrorCheckpointConnector-"}


def test_connect_group_rights_and_application_grants():
    acls = AclSet()
    connect_acls(acls, "User:m", "grp", exactly_once=True)
    topology = load_topology(_secure())
    principal_acls(acls, "reports-app", topology.principals["reports-app"])
    found = {Acl.parse(line)[0] for line in acls.lines()}
    assert {Acl("User:m", "TOPIC", f"grp-{k}", "LITERAL", "WRITE") for k in ("configs", "offsets", "status")} <= found
    assert Acl("User:m", "TRANSACTIONAL_ID", "connect-cluster-grp", "LITERAL", "WRITE") in found
    assert Acl("User:reports-app", "TOPIC", "edge.", "PREFIXED", "READ") in found
    assert Acl("User:reports-app", "GROUP", "reports", "PREFIXED", "READ") in found
    assert not any(a.principal == "User:reports-app" and a.operation == "WRITE" for a in found)


def test_authorizer_settings_deny_by_default_with_the_nodes_as_super_users():
    settings = authorizer_settings()
    assert settings["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert settings["allow.everyone.if.no.acl.found"] == "false"
    assert settings["super.users"] == "User:kafka-nodes@mirrorstack"
    assert settings["ssl.principal.mapping.rules"].endswith(",DEFAULT")


def test_no_user_the_model_creates_can_take_the_node_principal():
    """The nodes' super user has a character no SASL user name of the model may hold."""
    assert not re.fullmatch(USER_NAME, NODE_PRINCIPAL)
    assert f"/{NODE_PRINCIPAL}/" in authorizer_settings()["ssl.principal.mapping.rules"]


def test_who_authorizes_by_default():
    topology = load_topology(_secure())
    assert topology.authorizes("edge") and topology.authorizes("central")
    off = load_topology(_secure(clusters={**SECURE["clusters"], "edge": {
        "security": {"protocol": "SASL_SSL", "authorization": False}}}, principals={}))
    assert not off.authorizes("edge")
    plain = load_topology({"clusters": {"a": {}, "b": {}}, "flows": [{"source": "a", "target": "b"}]})
    assert not plain.authorizes("a")
    tls_only = load_topology({"clusters": {"a": {"security": {"protocol": "SSL"}}, "b": {}},
                              "flows": [{"source": "a", "target": "b"}]})
    assert not tls_only.authorizes("a")  # no client identity to grant to


@pytest.mark.parametrize("change, message", [
    ({"clusters": {"a": {"security": {"protocol": "SSL", "authorization": True}}, "b": {}}},
     "clusters.a.security.authorization: ACLs need clients with a name"),
    ({"principals": {"app": {"cluster": "nowhere", "allow": []}}}, "principals.app.cluster: unknown cluster"),
    ({"principals": {"app": {"cluster": "b", "allow": []}}}, "principals.app.cluster: b has no SASL users"),
    ({"principals": {"mirrorstack": {"cluster": "a", "allow": []}}}, "is mirrorstack's own user on a"),
    # issue 46: a user named like the nodes' principal was a super user, whatever `allow` said
    ({"principals": {"kafka-nodes": {"cluster": "a", "allow": []}}},
     "principals.kafka-nodes: 'kafka-nodes' is the nodes' principal of earlier mirrorstack versions"),
    ({"clusters": {"a": {"security": {"protocol": "SASL_SSL", "user": "kafka-nodes"}}, "b": {}}},
     "clusters.a.security.user: 'kafka-nodes' is the nodes' principal of earlier mirrorstack versions"),
    ({"clusters": {"a": {"security": {"protocol": "SASL_SSL", "mechanism": "PLAIN"}}, "b": {}},
      "principals": {"kafka-nodes": {"cluster": "a", "allow": []}}}, "principals.kafka-nodes: 'kafka-nodes' is"),
    ({"clusters": {"a": {"security": {"protocol": "SASL_SSL"}, "settings": {"super.users": "User:ops;User:root"}},
                   "b": {}}, "principals": {"root": {"cluster": "a", "allow": []}}},
     "principals.root: 'root' is a super user by the `super.users` setting of a"),
    ({"principals": {"kafka-nodes@mirrorstack": {"cluster": "a", "allow": []}}}, 'principals["kafka-nodes@mirrorstack"]'),
    ({"clusters": {"a": {"security": {"protocol": "SASL_SSL", "user": "kafka-nodes@mirrorstack"}}, "b": {}}},
     "clusters.a.security.user"),
    ({"principals": {"app": {"cluster": "a", "allow": [{"topic": "t", "group": "g", "operations": ["read"]}]}}},
     "names 2 resources (topic, group)"),
    ({"principals": {"app": {"cluster": "a", "allow": [{"topic": "t", "operations": ["fly"]}]}}}, "fly"),
])
def test_authorization_mistakes_are_named_before_anything_exists(change, message):
    base = {"clusters": {"a": {"security": {"protocol": "SASL_SSL"}}, "b": {}},
            "flows": [{"source": "a", "target": "b"}]}
    with pytest.raises(TopologyError) as raised:
        load_topology({**base, **change})
    assert message in str(raised.value)


def test_the_preview_lists_what_to_grant_on_an_external_cluster():
    """mirrorstack creates no ACL on an external cluster; the preview names the rights its
    flows need there, for the user mirrorstack's clients connect as."""
    topology = load_topology(_secure(clusters={
        **SECURE["clusters"],
        "partner": {"external": {"bootstrap_servers": "partner-kafka:9093", "security": {
            "protocol": "SASL_SSL", "mechanism": "SCRAM-SHA-512", "username": "mm2-at-partner"}}},
        "legacy": {"external": {"bootstrap_servers": "legacy-kafka:9092"}}},
        connect={**SECURE["connect"], "central": {**SECURE["connect"]["central"], "push": True}},
        flows=[*SECURE["flows"], {"source": "partner", "target": "central", "topics": ["invoices"],
                                  "connect": "central"},
               {"source": "central", "target": "legacy", "topics": ["edge.orders"],
                "connect": "central"}]))
    principals = {"partner": external_principal(topology.clusters["partner"].external.security),
                  "legacy": external_principal(topology.clusters["legacy"].external.security)}
    assert principals == {"partner": "User:mm2-at-partner", "legacy": "User:ANONYMOUS"}
    lines = topology_acls(topology, ["partner", "legacy"], principals, {name: "g" for name in topology.connect})
    partner = {Acl.parse(line)[0] for line in lines["partner"]}
    assert Acl("User:mm2-at-partner", "TOPIC", "invoices", "LITERAL", "READ") in partner
    assert not {a.operation for a in partner} & {"WRITE", "CREATE", "ALTER"}  # a source is only read
    legacy = {Acl.parse(line)[0] for line in lines["legacy"]}
    assert Acl("User:ANONYMOUS", "TOPIC", "central.edge.orders", "LITERAL", "WRITE") in legacy
    text = external_plan("partner", lines["partner"])
    assert text.startswith("ACLs needed on partner (external: mirrorstack creates none")
    assert any(line.startswith("  allow User:mm2-at-partner READ on TOPIC invoices (LITERAL) for flow "
                               "partner->central: source read") for line in text.splitlines()[1:])
    assert external_principal(ClientSecurity(protocol="SSL", mtls=True)) == "User:<your-client-certificate-subject>"


def test_a_refresh_with_no_broker_answering_keeps_the_acls_and_says_what_to_do(capsys):
    """Issue 46, defect 4: `refresh` failed after 31 s ("Failed while waiting for controller:
    Local: Timed out") naming neither the brokers nor a fix. Nothing listens at these ports."""
    import socket
    import time

    from mirrorstack.certificates.tls import issue, keystore_pem, new_ca
    from mirrorstack.kafka.acl_resource import REFRESH_TIMEOUT, KafkaAclsProvider
    ports = []
    for _ in range(2):  # free ports, closed again: connections are refused
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    ca_key, ca_cert = new_ca("test-ca")
    key, cert = issue(ca_key, ca_cert, "edge-broker-0", ["127.0.0.1"])
    lines = ["allow User:mirrorstack READ on TOPIC orders (LITERAL) for flow edge->central: source read"]
    props = {"cluster": "edge", "bootstrap": ",".join(f"127.0.0.1:{p}" for p in ports),
             "admin_keystore": keystore_pem(key, cert, ca_cert), "truststore": ca_cert, "acls": keyed(lines),
             "users": {}, "mechanism": "SCRAM-SHA-512"}
    started = time.monotonic()
    result = KafkaAclsProvider().read("id", props)
    assert time.monotonic() - started < REFRESH_TIMEOUT + 10
    assert result.outs == props  # kept as last applied, not recorded as deleted
    said = capsys.readouterr().err
    assert f"edge ACLs: no broker of {props['bootstrap']} answered within {REFRESH_TIMEOUT:.0f}s" in said, said
    assert "fix: start the brokers" in said and "\n" not in said.strip(), said


def _planned(**changes) -> dict[str, list[str]]:
    """The secure stack's ACL lines per cluster (what the ACL resources are given), after `changes`."""
    topology = load_topology(_secure(**changes))
    aliases = [a for a in topology.clusters if topology.authorizes(a)]
    principals = {a: client_principal(a, topology.clusters[a].security) for a in aliases}
    return topology_acls(topology, aliases, principals, {name: "g" for name in topology.connect})


def test_keyed_by_the_acl_a_change_is_acls_added_and_removed_never_an_index_shift():
    """Issue 46: the resource's input was the list of lines, which `preview --diff` pairs by position:
    a principal added showed `~ [1]: "allow User:inv-writer CREATE…" => "allow User:mirrorstack
    DESCRIBE_CONFIGS…"`. Keyed by the ACL (what the engine diffs now), the same change is keys
    added and removed, and an ACL kept shows unchanged; the stack output's lines stay as they were."""
    before = _planned()
    after = _planned(principals={**SECURE["principals"], "inv-writer": {
        "cluster": "edge", "allow": [{"topic": "invoices", "operations": ["create", "write"]}]}})
    old, new = keyed(before["edge"]), keyed(after["edge"])
    assert old["allow User:mirrorstack READ on TOPIC orders (LITERAL)"] == \
        "flow edge->central: source read, flow edge->central: validation"
    assert lines_of(old) == before["edge"] and lines_of(new) == after["edge"]  # the stack output `acls`
    assert set(new) - set(old) == {"allow User:inv-writer CREATE on TOPIC invoices (LITERAL)",
                                   "allow User:inv-writer WRITE on TOPIC invoices (LITERAL)"}
    assert set(old) <= set(new) and all(new[acl] == parts for acl, parts in old.items())
    # what the list showed: lines kept, paired by position with other lines
    shifted = [(a, b) for a, b in zip(before["edge"], after["edge"]) if a != b]
    assert shifted and shifted[0][0] in after["edge"], shifted

    # A topic out of the flow and another in: only their ACLs go and come, on both clusters.
    flow = SECURE["flows"][0]
    swapped = _planned(flows=[{**flow, "topics": ["orders", "refunds"]}])
    for alias in ("edge", "central"):
        old, new = keyed(before[alias]), keyed(swapped[alias])
        assert {acl.split(" on ")[1].split()[1] for acl in set(old) - set(new)} <= {"payments", "edge.payments"}
        assert {acl.split(" on ")[1].split()[1] for acl in set(new) - set(old)} <= {"refunds", "edge.refunds"}
        assert set(old) ^ set(new) and all(old[acl] == new[acl] for acl in set(old) & set(new))


def _provider_props(acls) -> dict:
    """An ACL resource's state with a real node keystore; no broker listens at its bootstrap."""
    from mirrorstack.certificates.tls import issue, keystore_pem, new_ca
    ca_key, ca_cert = new_ca("test-ca")
    key, cert = issue(ca_key, ca_cert, "edge-broker-0", ["127.0.0.1"])
    return {"cluster": "edge", "bootstrap": "127.0.0.1:9", "admin_keystore": keystore_pem(key, cert, ca_cert),
            "truststore": ca_cert, "acls": acls, "users": {}, "mechanism": "SCRAM-SHA-256"}


def test_state_written_as_a_list_is_rewritten_as_a_map_by_an_update_that_changes_nothing_on_the_cluster(capsys):
    """An upgrade: the first preview shows the ACL resources updated (`acls`, list => map) and nothing
    else of theirs; that `up` creates and deletes no ACL (no broker is even asked here)."""
    from mirrorstack.kafka.acl_resource import KafkaAclsProvider
    provider, lines = KafkaAclsProvider(), _planned()["edge"]
    news = _provider_props(keyed(lines))
    olds = {**news, "acls": lines}
    diff = provider.diff("id", olds, news)
    assert diff.changes is True and diff.replaces == []
    assert provider.diff("id", news, news).changes is False
    assert provider.diff("id", news, {**news, "acls": {**news["acls"], "allow User:x READ on TOPIC t (LITERAL)": "p"}}
                         ).changes is True
    assert provider.update("id", olds, news).outs["acls"] == keyed(lines)
    said = capsys.readouterr().err
    assert f"edge ACLs: 0 added, 0 removed, {len(lines)} kept by this stack" in said, said


def test_the_validation_report_topic_is_granted_on_the_cluster_the_report_goes_to_only():
    topology = load_topology(_secure())
    reports_to = topology.validation_reports_to()
    planned = _planned()
    report_acls = {alias: {line for line in lines if REPORT_TOPIC in line} for alias, lines in planned.items()}
    assert report_acls[reports_to] == {
        f"allow User:mirrorstack {op} on TOPIC {REPORT_TOPIC} (LITERAL) for validation: its report"
        for op in ("CREATE", "WRITE", "READ", "DESCRIBE")}
    assert not any(lines for alias, lines in report_acls.items() if alias != reports_to)
    without = _planned(validation=None)
    assert not any(REPORT_TOPIC in line for lines in without.values() for line in lines)


def test_the_failover_switch_may_read_and_move_its_groups_on_both_sides():
    """alter_consumer_group_offsets needs GROUP READ where the groups arrive; the exact position needs the
    records on both sides (proved on a deny-by-default stack by tests/integration/test_docker_platform.py)."""
    failover = {"primary": "edge", "standby": "central", "active": "edge", "cutover": True}
    planned = _planned(failover={**failover, "groups": ["billing", "reports-.*"]})
    switch = {alias: {line.split(" for ")[0] for line in lines if "for failover edge->central" in line}
              for alias, lines in planned.items()}
    for alias, topics in (("edge", ("orders", "payments")), ("central", ("edge.orders", "edge.payments"))):
        assert switch[alias] == {
            *(f"allow User:mirrorstack {op} on GROUP billing (LITERAL)" for op in ("READ", "DESCRIBE")),
            *(f"allow User:mirrorstack {op} on GROUP reports- (PREFIXED)" for op in ("READ", "DESCRIBE")),
            *(f"allow User:mirrorstack {op} on TOPIC {t} (LITERAL)" for op in ("READ", "DESCRIBE") for t in topics)}
    # without failover.groups: the flow's own (`.*`: every group)
    every = _planned(failover=failover)
    assert any(line.startswith("allow User:mirrorstack READ on GROUP * (LITERAL) for") and "failover" in line
               for line in every["central"])
    assert not any("failover" in line for lines in _planned().values() for line in lines)


def test_the_drill_may_write_prove_and_delete_its_copies_where_they_land():
    failover = {"primary": "edge", "standby": "central", "active": "edge", "cutover": True}
    drilled = _planned(failover={**failover, "drill": {"run": "d1"}})
    copies = {alias: {line.split(" for ")[0] for line in lines if "drill copies" in line}
              for alias, lines in drilled.items()}
    assert copies["central"] == {f"allow User:mirrorstack {op} on GROUP mirrorstack-drill. (PREFIXED)"
                                 for op in ("READ", "DESCRIBE", "DELETE")}
    assert not copies["edge"]  # a cutover's drill only lands on the standby
    assert not any("drill" in line for lines in _planned(failover=failover).values() for line in lines)
