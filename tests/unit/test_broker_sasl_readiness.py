"""A secured broker is ready once the stack's SASL users authenticate on its
client listener, the SCRAM ones set again first (kafka/sasl_check.py),
and what `up` says when one is refused. (How the cluster component asks for
it: test_secured_platforms.py; against real brokers: test_scram_users.py.)"""
from __future__ import annotations

import pytest

from mirrorstack.kafka import sasl_login, security
from mirrorstack.model.spec import load_topology
from mirrorstack.kafka import sasl_check
from mirrorstack.platforms.descriptions import once_healthy_checks

OWN = "127.0.0.1:9001"
SPEC = {"kind": "kafka", "bootstrap": "127.0.0.1:9101", "client.security.protocol": "ssl",
        "client.ssl.ca.location": "/x/ca.pem", "sasl.bootstrap": OWN,
        "sasl.client.security.protocol": "sasl_ssl", "sasl.client.sasl.mechanism": "SCRAM-SHA-512",
        "sasl.client.ssl.ca.location": "/x/ca.pem"}
CREDENTIALS = {"mirrorstack": "pw-m", "app4": "pw-a"}
REFUSED = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"


class Broker:
    """A broker that accepts `users` (with their CREDENTIALS passwords); `set_users` adds users to it."""

    def __init__(self, users=(), keeps_what_is_set=True):
        self.users, self.keeps, self.calls, self.sets = set(users), keeps_what_is_set, [], []

    def attempt(self, address, client, user, password):
        self.calls.append((address, user))
        assert address == OWN and client["sasl.mechanism"] == "SCRAM-SHA-512" and "sasl.password" not in client
        return None if user in self.users and password == CREDENTIALS[user] else REFUSED

    def set_users(self, spec, credentials):
        self.sets.append(dict(credentials))
        if self.keeps:
            self.users |= set(credentials)


def test_refusals_name_each_user_the_broker_refuses():
    assert sasl_check.refusals(SPEC, CREDENTIALS, Broker({"mirrorstack"}).attempt) == {"app4": REFUSED}
    assert sasl_check.refusals(SPEC, CREDENTIALS, Broker({"mirrorstack", "app4"}).attempt) == {}


def test_a_restarted_broker_that_lost_its_users_gets_them_set_again_and_is_ready(tmp_path):
    """The issue's roll: Kafka dropped every SCRAM user of the restarted broker; its start sets them again."""
    broker = Broker()
    sasl_check.wait_accepted("tgt-broker-0", SPEC, CREDENTIALS, alive=lambda: True, log_file=str(tmp_path / "log"),
                             attempt=broker.attempt, set_users=broker.set_users)
    assert broker.sets == [CREDENTIALS] and broker.users == set(CREDENTIALS)


def test_a_broker_still_refusing_after_the_wait_fails_naming_it_the_user_and_its_log_line(tmp_path, monkeypatch):
    monkeypatch.setattr(sasl_login.time, "sleep", lambda _: None)
    log = tmp_path / "service.log"
    log.write_text(f"started\n[x] INFO [SocketServer] Failed authentication with /127.0.0.1 (channelId=1) "
                   f"({REFUSED})\n")
    broker = Broker({"mirrorstack"}, keeps_what_is_set=False)
    with pytest.raises(RuntimeError) as failed:
        sasl_check.wait_accepted("tgt-broker-1", SPEC, CREDENTIALS, alive=lambda: True, log_file=str(log),
                                 timeout=0.2, attempt=broker.attempt, set_users=broker.set_users)
    assert str(failed.value).splitlines()[:3] == [
        f"tgt-broker-1 refuses the stack's SCRAM-SHA-512 user(s) on its client listener {OWN}: app4 ({REFUSED}).",
        f"Its log: [x] INFO [SocketServer] Failed authentication with /127.0.0.1 (channelId=1) ({REFUSED})",
        "It was stopped, so `up` goes no further (a roll stops here, before another broker goes down)."]
    assert "set again as the node just before" in str(failed.value)


def test_plain_users_are_not_set_and_a_refusal_points_at_the_jaas(tmp_path):
    spec = {**SPEC, "sasl.client.sasl.mechanism": "PLAIN"}
    sasl_check.set_scram_users(spec, CREDENTIALS)  # nothing to set: no broker is asked
    message = sasl_check.refusal_message("central-broker-0", spec, {"app4": "refused"}, None)
    assert "secrets/broker.properties (its JAAS)" in message and "Its log" not in message


def test_a_broker_that_died_meanwhile_says_so(tmp_path):
    broker = Broker(keeps_what_is_set=False)
    with pytest.raises(RuntimeError, match="tgt-broker-0 exited while its clients' users were checked"):
        sasl_check.wait_accepted("tgt-broker-0", SPEC, CREDENTIALS, alive=lambda: False,
                                 log_file=str(tmp_path / "log"), attempt=broker.attempt, set_users=broker.set_users)


def test_a_refused_connection_is_not_a_refused_user_and_librdkafka_says_why():
    why = sasl_check.authenticates("127.0.0.1:1", {}, "u", "p", timeout=1)
    assert why and "uthentication" not in why
    assert "Connect to ipv4#127.0.0.1:1 failed: Connection refused" in why, why


@pytest.mark.parametrize("protocol, mtls, expected", [
    ("SASL_SSL", False, {"sasl.client.ssl.ca.location": "/n/ca.pem"}),
    ("SASL_SSL", True, {"sasl.client.ssl.ca.location": "/n/ca.pem", "sasl.client.ssl.certificate.location": "/n/k.pem",
                        "sasl.client.ssl.key.location": "/n/k.pem"}),
])
def test_the_health_keys_say_how_clients_reach_the_broker_without_any_password(protocol, mtls, expected):
    sec = load_topology(_topology(protocol=protocol, mtls=mtls)).clusters["tgt"].security
    keys = security.sasl_readiness(sec, listener=OWN, keystore="/n/k.pem", truststore="/n/ca.pem")
    assert keys == {"sasl.bootstrap": OWN, "sasl.client.security.protocol": protocol.lower(),
                    "sasl.client.sasl.mechanism": "SCRAM-SHA-512", **expected}
    # what a process platform runs once the broker is healthy: found by the key (no import of kafka/ there)
    assert once_healthy_checks(keys) == [sasl_check.wait_accepted]


def test_a_broker_without_sasl_has_no_such_keys():
    sec = load_topology(_topology(protocol="SSL")).clusters["tgt"].security
    assert security.sasl_readiness(sec, listener=OWN, keystore="k", truststore="t") == {}


def _topology(**sec):
    return {"platform": "local",
            "clusters": {"src": {"brokers": 1}, "tgt": {"brokers": 2, "security": sec}},
            "flows": [{"source": "src", "target": "tgt", "topics": ["orders"]}],
            **({"principals": {"app4": {"cluster": "tgt", "allow": []}}} if sec.get("protocol") != "SSL" else {})}


def test_new_users_to_check_restart_no_broker(tmp_path):
    import subprocess
    import sys

    from mirrorstack.platforms.local.service import LocalServiceProvider
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        stat = open(f"/proc/{proc.pid}/stat").read()
        olds = {"name": "tgt-broker-0", "workdir": str(tmp_path), "files": {"a": "1"}, "argv": ["x"], "prepare": [],
                "health": SPEC, "timeout_seconds": "180", "pid": str(proc.pid),
                "start_time": stat[stat.rindex(")") + 2:].split()[19], "log_file": str(tmp_path / "l")}
        assert LocalServiceProvider().diff("id", olds, {**olds, "health_secrets": CREDENTIALS}).changes is False
        assert LocalServiceProvider().diff("id", {**olds, "health_secrets": CREDENTIALS},
                                           {**olds, "health_secrets": {**CREDENTIALS, "app5": "x"}}).changes is False
    finally:
        proc.kill(), proc.wait()


# ---------------------------------------------------------------- docker, kubernetes: the program's check

LOGIN = {"cluster": "tgt", "broker": "tgt-broker-1", "address": "localhost:20001", "protocol": "SASL_SSL",
         "mechanism": "SCRAM-SHA-512", "truststore": "CA-PEM", "users": CREDENTIALS, "started": "container-1",
         "admin": {"bootstrap": "127.0.0.1:20002", "admin_keystore": "NODE", "truststore": "CA-PEM"},
         "logs": "docker logs mirrorstack-s-tgt-broker-1"}


def test_a_broker_restarted_in_a_container_is_checked_again_not_when_only_users_change():
    from mirrorstack.kafka.broker_logins import BrokerLoginsProvider
    provider = BrokerLoginsProvider()
    assert provider.diff("id", LOGIN, {**LOGIN, "started": "container-2"}).changes is True
    assert provider.diff("id", LOGIN, {**LOGIN, "users": {**CREDENTIALS, "app5": "x"}}).changes is False
    assert provider.diff("id", LOGIN, {**LOGIN}).changes is False


def test_the_program_sets_scram_users_again_as_a_node_then_fails_naming_broker_and_user(monkeypatch):
    """As on local: the SCRAM users set again first (through the node's way in), then each
    logs in on CLIENT; one still refused fails `up` naming the broker, the user and where to look."""
    from mirrorstack.kafka import acl_resource, broker_logins, scram_users
    sets = []
    monkeypatch.setattr(acl_resource, "admin_client", lambda admin: ("node", admin["bootstrap"]))
    monkeypatch.setattr(scram_users, "set_users", lambda admin, mechanism, users, cluster: sets.append(
        (admin, mechanism.name, dict(users), cluster)))
    monkeypatch.setattr(sasl_login.time, "sleep", lambda _: None)
    seen = []

    def attempt(address, client, user, password):
        seen.append((address, client["sasl.mechanism"], client["broker.address.family"], "sasl.password" in client))
        return REFUSED if user == "app4" else None
    with pytest.raises(RuntimeError) as failed:
        broker_logins.check(LOGIN, attempt=attempt, timeout=0)
    assert sets == [(("node", "127.0.0.1:20002"), "SCRAM_SHA_512", CREDENTIALS, "tgt")]
    assert set(seen) == {("localhost:20001", "SCRAM-SHA-512", "v4", False)}
    assert str(failed.value).splitlines() == [
        f"tgt-broker-1 refuses the stack's SCRAM-SHA-512 user(s) on its client listener localhost:20001: "
        f"app4 ({REFUSED}).",
        "`up` stops here: the brokers after it in the roll are not touched.",
        "Each was set again as the node just before (same password); fix: look in the broker's log "
        "(docker logs mirrorstack-s-tgt-broker-1) why it still refuses (its `sasl.enabled.mechanisms` and CLIENT "
        "listener settings), then `pulumi up`."]
    broker_logins.check({**LOGIN, "users": {"mirrorstack": "pw-m"}}, attempt=attempt, timeout=0)  # accepted


def test_plain_users_are_only_checked_and_mtls_brings_the_clients_certificate():
    from mirrorstack.kafka import broker_logins
    from tests.support.pulumi_mocks import fake_pem
    plain = {**LOGIN, "mechanism": "PLAIN", "admin": None}
    assert broker_logins.set_again(plain) is False  # PLAIN's users are in the broker's JAAS: nothing to set
    assert broker_logins.set_again({**LOGIN, "admin": None}) is False  # no node's way in (no authorization)
    with pytest.raises(RuntimeError, match=r"(?s)tgt-broker-1 refuses .* PLAIN .*app4 \(refused\).*"
                                           r"secrets/broker.properties \(its JAAS\) and its log \(docker logs"):
        broker_logins.check(plain, attempt=lambda a, c, user, p: "refused" if user == "app4" else None, timeout=0)
    keystore = fake_pem("PRIVATE KEY", "K") + fake_pem("CERTIFICATE", "C")
    config = broker_logins.client_config({**plain, "keystore": keystore})
    assert config["ssl.ca.pem"] == "CA-PEM" and config["security.protocol"] == "sasl_ssl"
    assert "PRIVATE KEY" in config["ssl.key.pem"] and "CERTIFICATE" in config["ssl.certificate.pem"]
    assert "ssl.ca.pem" not in broker_logins.client_config({**plain, "protocol": "SASL_PLAINTEXT"})


def test_a_connection_lost_on_its_way_is_tried_again_and_a_user_let_in_is_not(monkeypatch):
    """Through a tunnel a connection may fail before it authenticates: only the users not yet let
    in are tried again (a user let in once counts), so one round's lost connection is no refusal."""
    monkeypatch.setattr(sasl_login.time, "sleep", lambda _: None)
    tries = []
    first = {"mirrorstack": "Failed to get metadata: Local: Broker transport failure", "app4": REFUSED}

    def attempt(address, client, user, password):
        tries.append(user)
        return first.get(user) if tries.count(user) == 1 else None
    assert sasl_login.wait_accepted(OWN, {}, {"mirrorstack": "m", "app4": "a", "orders": "o"}, attempt=attempt) == {}
    assert sorted(tries) == ["app4", "app4", "mirrorstack", "mirrorstack", "orders"]
