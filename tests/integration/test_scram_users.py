"""SCRAM users across a broker restart, on a real 2-broker cluster (issue 46,
defect 3): a principal renamed by the stack (set the new user, retire the
old one) keeps every user on a restarted broker; a credential DELETED shows
why it must not be: Kafka 4.3 drops every SCRAM user of the mechanism on
each broker that restarts afterwards, and a broker's readiness
(kafka/sasl_check.py) sets the stack's users again and checks that
they get in.

The two tests use one mechanism each (SCRAM-SHA-512, SCRAM-SHA-256): Kafka
keeps and replays each mechanism's credentials apart, so the deletion the
second leaves in the metadata log cannot touch the first's users.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, UserScramCredentialDeletion

from mirrorstack.kafka.scram_users import changed_users, retire_users, scram_mechanism, set_users, wait_all
from mirrorstack.kafka import sasl_check
from tests.support.scram import ScramKafkaCluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = ScramKafkaCluster("scram", tmp_path_factory.mktemp("scram"), brokers=2)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def _admin(cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})


def _refused(cluster, index: int, mechanism: str, users: dict[str, str]) -> list[str]:
    return sorted(sasl_check.refusals(cluster.readiness_spec(index, mechanism), users))


def _until_every_broker_accepts(cluster, mechanism: str, users: dict[str, str], timeout: float = 30) -> None:
    """A user set is committed by the controller; each broker serves it once it has read that far."""
    deadline = time.monotonic() + timeout
    while any(_refused(cluster, i, mechanism, users) for i in range(cluster.broker_count)):
        assert time.monotonic() < deadline, f"{sorted(users)} not accepted by every broker after {timeout:.0f}s"
        time.sleep(0.2)


def test_a_principal_renamed_by_the_stack_leaves_every_user_to_a_restarted_broker(cluster):
    """The issue's steps, as the ACL resource takes them: `app`, then renamed `app4` (set app4, then
    retire app), then a broker restarts (a roll)."""
    admin, mechanism = _admin(cluster), scram_mechanism("SCRAM-SHA-512")
    before = {"mirrorstack": "own-password", "app": "app-password"}
    set_users(admin, mechanism, before, "scram")
    after = {"mirrorstack": "own-password", "app4": "app4-password"}
    users, gone = changed_users(before, after)
    assert (users, gone) == ({"app4": "app4-password"}, ["app"])
    set_users(admin, mechanism, users, "scram")
    retire_users(admin, mechanism, gone, "scram")
    _until_every_broker_accepts(cluster, "SCRAM-SHA-512", after)

    cluster.restart_broker(0)
    assert _refused(cluster, 0, "SCRAM-SHA-512", {**after, "app": before["app"]}) == ["app"]


def test_kafka_drops_every_scram_user_of_each_broker_restarted_after_a_deletion_and_readiness_sets_them_again(
        cluster):
    """Kafka's own replay, pinned down: why mirrorstack retires users instead of deleting them
    (mirrorstack.kafka.scram_users), and why a broker's readiness sets the stack's users again at
    every start: a user set again comes back, and is lost again at the next restart. Should a Kafka
    upgrade keep the users, this test fails: the retirement and the setting again may then go."""
    admin, mechanism = _admin(cluster), scram_mechanism("SCRAM-SHA-256")
    set_users(admin, mechanism, {"mirrorstack": "own-password", "app": "app-password"}, "scram")
    set_users(admin, mechanism, {"app4": "app4-password"}, "scram")
    wait_all(admin.alter_user_scram_credentials([UserScramCredentialDeletion("app", mechanism)]), "deleting app")
    users = {"mirrorstack": "own-password", "app4": "app4-password"}
    _until_every_broker_accepts(cluster, "SCRAM-SHA-256", users)
    spec = cluster.readiness_spec(1, "SCRAM-SHA-256")

    for _ in range(2):
        cluster.restart_broker(1)
        assert _refused(cluster, 1, "SCRAM-SHA-256", users) == ["app4", "mirrorstack"]
        assert _refused(cluster, 0, "SCRAM-SHA-256", users) == []
        sasl_check.wait_accepted("scram/broker-1", spec, users, alive=lambda: True,
                                 log_file=cluster.broker_handles[1].log_file)
        assert _refused(cluster, 1, "SCRAM-SHA-256", users) == []

    with pytest.raises(RuntimeError, match=r"(?s)^scram/broker-1 refuses the stack's SCRAM-SHA-256 user\(s\) on its "
                                           r"client listener .*: app4 \(.*invalid credentials with SASL mechanism "
                                           r"SCRAM-SHA-256.*\)\.\nIts log: .*Failed authentication"):
        sasl_check.wait_accepted("scram/broker-1", spec, {"app4": "not-its-password"}, alive=lambda: True,
                                 log_file=cluster.broker_handles[1].log_file, timeout=0, set_users=lambda *_: None)
