"""Malformed stack files, as a user would write them: each is refused by the
topology model (so by `pulumi up` before any resource exists) with a problem
that starts with the exact field path and says how to fix it.

test_model.py checks each rule on edited dicts; these are whole stack files
(stacks/Pulumi.<stack>.yaml), parsed the way the tests of the repo's stacks
read them, so YAML's own typing (unquoted numbers, strings for lists) is in
play too.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mirrorstack.model.spec import TopologyError, load_topology
from mirrorstack.model.rules import SECRET_KEY, secret_problems

CASES_FILE = Path(__file__).with_name("malformed_stacks.yaml")  # the stack files and what each must be told
TABLES = yaml.safe_load(CASES_FILE.read_text())


def cases(table: str, *fields: str) -> list:
    """The cases of one table of CASES_FILE: (stack file, *fields), with their ids."""
    return [pytest.param(case["stack"], *(case[f] for f in fields), id=case["id"]) for case in TABLES[table]]


def topology_of(stack_file: str):
    return yaml.safe_load(stack_file)["config"]["mirrorstack:topology"]


def refusal(stack_file: str) -> list[str]:
    with pytest.raises(TopologyError) as info:
        load_topology(topology_of(stack_file))
    return info.value.problems


def at(problems: list[str], path: str) -> list[str]:
    """The problems reported at `path` (an identity cycle lists several paths)."""
    return [p for p in problems if path in p.split(": ", 1)[0].split(", ")]


def fixes(problem: str) -> str:
    return problem.partition("fix:")[2]


SECRET_FIX = "pulumi config set --secret --path 'mirrorstack:clusterSecrets."


# (stack file, field path the problem starts with, fragment of its fix)
CASES = cases("cases", "path", "fix")


def flow_stack(flow: str, clusters: str = "us: {}\n      central: {}", extra: str = "") -> str:
    """A stack file with one flow us -> central (YAML flow mapping fields in `flow`)."""
    return f"""
config:
  mirrorstack:topology:
    clusters:
      {clusters}
    flows:
      - {{source: us, target: central, {flow}}}{extra}
"""


# What the JVM side (MM2's java.util.regex, Kafka's topic names, Connect's ConfigDefs)
# would refuse after `up`: (stack file, path, what is wrong, fragment of the fix).
JVM_CASES = cases("jvm_cases", "path", "message", "fix")


@pytest.mark.parametrize("stack_file, path, message, fix", JVM_CASES)
def test_what_the_jvm_would_refuse_is_refused_first(stack_file, path, message, fix):
    problems = refusal(stack_file)
    assert any(message in p and fix in fixes(p) for p in at(problems, path)), problems


def test_java_regex_syntax_and_free_overrides_are_accepted():
    # What MM2 accepts must not be refused, though Python's re would refuse it.
    load_topology(topology_of(flow_stack(
        r'topics: ["\\p{Lower}+\\.orders", "(?<r>us|uk)-\\k<r>", "\\Qa.b\\E", "pre(?i)fix"], separator: "_", '
        'overrides: {source: {producer.override.linger.ms: "50", sync.topic.configs.interval.seconds: "-1"}, '
        'checkpoint: {emit.checkpoints.interval.seconds: "5", emit.checkpoints.enabled: "true"}}')))


# Regexes that select nothing: MM2 would take them and silently copy (or leave out)
# nothing by them: (stack file, path, what is wrong, fragment of the fix).
SELECTS_NOTHING_CASES = cases("selects_nothing_cases", "path", "message", "fix")


@pytest.mark.parametrize("stack_file, path, message, fix", SELECTS_NOTHING_CASES)
def test_a_regex_that_selects_nothing_is_refused_naming_the_field_and_the_fix(stack_file, path, message, fix):
    problems = refusal(stack_file)
    assert len(at(problems, path)) == 1, problems  # once, also for a fan-out entry's expanded flows
    assert any(message in p and fix in fixes(p) for p in at(problems, path)), problems


def test_regexes_that_may_select_something_are_accepted():
    # Group names may hold any character; `(?x)` makes Java ignore the space; `a^b` matches nothing
    # but is not judged (components/model/regex_reach.py: only what surely matches nothing is refused).
    load_topology(topology_of(flow_stack(
        r'topics: [".*", "orders", "\\S+", "[^ ]+", "(?x) a b", "a|b c", "a^b", "\\p{Lower}+", "(?=x)x"], '
        r'topics_exclude: ["tmp-.*", "\\Qa.b\\E"], groups: ["team a", "^.+$", "x?"], '
        r'groups_exclude: ["console consumer"]')))


# Refused by pydantic's type and constraint checks (strict: YAML's types are
# final, "yes" is no boolean and "2" no integer): pydantic's message (the hint
# here) and a fix that says what to write instead (the fragment after it).
TYPE_CASES = cases("type_cases", "path", "hint", "fix")


@pytest.mark.parametrize("stack_file, path, fix", CASES)
def test_malformed_stack_is_refused_at_the_field_with_the_fix(stack_file, path, fix):
    problems = refusal(stack_file)
    assert any(fix in fixes(p) for p in at(problems, path)), problems


@pytest.mark.parametrize("stack_file, path, hint, fix", TYPE_CASES)
def test_wrongly_typed_stack_is_refused_at_the_field_with_the_fix(stack_file, path, hint, fix):
    problems = refusal(stack_file)
    assert any(hint in p and fix in fixes(p) for p in at(problems, path)), problems


@pytest.mark.parametrize("stack_file", [case.values[0] for case in [*CASES, *TYPE_CASES, *JVM_CASES,
                                                                  *SELECTS_NOTHING_CASES]],
                         ids=[case.id for case in [*CASES, *TYPE_CASES, *JVM_CASES, *SELECTS_NOTHING_CASES]])
def test_every_problem_ends_with_a_fix(stack_file):
    for problem in refusal(stack_file):
        assert fixes(problem).strip(), problem


def test_every_case_is_a_whole_stack_file_with_one_topology():
    # The cases must fail for the reason named, not for being unreadable.
    for case in [*CASES, *TYPE_CASES]:
        document = yaml.safe_load(case.values[0])
        assert list(document) == ["config"] and list(document["config"]) == ["mirrorstack:topology"], case.id
    assert len(CASES) + len(TYPE_CASES) >= 34


# ---------------------------------------------------------------- mirrorstack:clusterSecrets (keys only)

SECURED = """
config:
  mirrorstack:topology:
    clusters:
      legacy:
        external:
          bootstrap_servers: legacy1:9094
          security: {protocol: SASL_SSL, username: mirror, mtls: true}
      partner:
        external:
          bootstrap_servers: partner1:9093
          security: {protocol: SSL}
      new:
        brokers: 3
        security: {protocol: SASL_SSL}
    flows:
      - {sources: [legacy, partner], target: new}
"""
COMPLETE = {"legacy": {"password", "ssl.keystore.key"}, "partner": {"ssl.truststore.password"}}


def test_complete_secrets_pass():
    assert secret_problems(load_topology(topology_of(SECURED)), COMPLETE) == []


@pytest.mark.parametrize("secret_keys, path, fix", [
    pytest.param({**COMPLETE, "parnter": {"ssl.truststore.password"}}, "mirrorstack:clusterSecrets.parnter",
                 "use one of legacy, new, partner", id="unknown-alias"),
    pytest.param({**COMPLETE, "new": {"password"}}, "mirrorstack:clusterSecrets.new",
                 "pulumi config rm --path 'mirrorstack:clusterSecrets.new'", id="secrets-for-a-deployed-cluster"),
    pytest.param({**COMPLETE, "legacy": {"ssl.keystore.key", "ssl.key.password"}},
                 "mirrorstack:clusterSecrets.legacy.password", SECRET_FIX + "legacy.password'",
                 id="sasl-without-password"),
    pytest.param({**COMPLETE, "legacy": {"sasl.jaas.config"}}, "clusters.legacy.external.security.mtls",
                 SECRET_FIX + 'legacy["ssl.keystore.key"]', id="mtls-without-key"),
    pytest.param({"partner": {"ssl.truststore.password"}}, "mirrorstack:clusterSecrets.legacy.password",
                 SECRET_FIX + "legacy.password'", id="no-secrets-for-a-sasl-cluster"),
])
def test_cluster_secrets_are_checked_by_key(secret_keys, path, fix):
    problems = secret_problems(load_topology(topology_of(SECURED)), secret_keys)
    assert any(fix in fixes(p) for p in at(problems, path)), problems


def test_a_pem_key_counts_as_the_mtls_key_only_from_the_secrets():
    # load_topology refuses it in properties (pem-key-in-properties); were it
    # there anyway, it would still not stand in for the secret.
    topology = load_topology(topology_of(SECURED))
    topology.clusters["legacy"].external.security.properties["ssl.keystore.key"] = "-----BEGIN PRIVATE KEY-----"
    problems = secret_problems(topology, {**COMPLETE, "legacy": {"password"}})
    assert any(SECRET_FIX + 'legacy["ssl.keystore.key"]' in fixes(p)
               for p in at(problems, "clusters.legacy.external.security.mtls")), problems
    # a keystore file on the Connect hosts is no secret and does stand in
    topology.clusters["legacy"].external.security.properties = {"ssl.keystore.location": "/etc/kafka/client.p12"}
    assert secret_problems(topology, {**COMPLETE, "legacy": {"password"}}) == []


@pytest.mark.parametrize("key, secret", [
    ("ssl.keystore.key", True), ("producer.ssl.keystore.key", True), ("ssl.key.password", True),
    ("ssl.keystore.password", True), ("ssl.truststore.password", True), ("sasl.jaas.config", True),
    ("sasl.oauthbearer.assertion.private.key", True), ("sasl.oauthbearer.assertion.private.key.passphrase", True),
    ("ssl.keystore.location", False), ("ssl.keystore.type", False), ("ssl.truststore.location", False),
    ("ssl.keystore.certificate.chain", False), ("sasl.oauthbearer.assertion.private.key.file", False),
    ("key.converter", False), ("sync.topic.configs.enabled", False),
])
def test_secret_keys_by_name(key, secret):
    assert bool(SECRET_KEY.search(key)) is secret
