"""SCRAM users of a cluster, kept through the Admin API: set the stack's, and
retire the ones it no longer has, without ever deleting a credential.

Why never deleted: Kafka 4.3.1 (4.4.0 as well) can lose every SCRAM user of
a mechanism on a broker that replays a credential deletion from its metadata
log. A broker replays its log at each start, the records since its last
snapshot batched into deltas (one, on the clusters measured). Its
`ScramDelta.apply` drops the mechanism's user map from the new image as soon
as a removal leaves that map empty, and the users it puts after the removal
(in HashMap order, not the log's) go into the detached map. From an empty
image, the removal of `app` comes before `mirrorstack` and `app4` and
empties the map: the image, and the broker's credential cache seeded from
it, hold no SCRAM user at all. So after one deletion each restarted broker
refused every SCRAM user (issue 46). A retired user gets a random password
that nobody keeps instead: the same lock-out for that user, and no deletion
in the log. (Against a deletion already there, each local broker's start
sets the stack's users again: mirrorstack.kafka.sasl_check.)

Pure: no pulumi (the admin client is given).
"""
from __future__ import annotations

import secrets

ITERATIONS = 8192
TIMEOUT = 30.0


def scram_mechanism(name: str | None):
    """The Admin API's ScramMechanism of "SCRAM-SHA-512"/"SCRAM-SHA-256"; None
    for any other mechanism (PLAIN's users live in the brokers' JAAS)."""
    from confluent_kafka.admin import ScramMechanism
    if not (name or "").startswith("SCRAM-"):
        return None
    return ScramMechanism[name.replace("-", "_")]


def wait_all(futures: dict, what: str) -> None:
    """Every future's result, the failures reported together."""
    failed = []
    for key, future in futures.items():
        try:
            future.result(timeout=TIMEOUT)
        except Exception as e:  # noqa: BLE001 - every failure is reported together below
            failed.append(f"{key}: {e}")
    if failed:
        raise RuntimeError(f"{what} failed: " + "; ".join(failed))


def set_users(admin, mechanism, users: dict[str, str], cluster: str) -> None:
    """Create or update each user {name: password}."""
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialUpsertion
    if not users:
        return
    wait_all(admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, ITERATIONS), password.encode())
        for user, password in sorted(users.items())]), f"{cluster}: creating SCRAM users {', '.join(sorted(users))}")


def retire_users(admin, mechanism, names, cluster: str) -> None:
    """Lock each user out for good: a random password nobody keeps (see the
    module's docstring for why not a deletion)."""
    set_users(admin, mechanism, {name: secrets.token_urlsafe(32) for name in names}, cluster)


def changed_users(old: dict | None, new: dict | None) -> tuple[dict[str, str], list[str]]:
    """(users to set: new or with a new password, names to retire: gone)."""
    old, new = old or {}, new or {}
    return {u: p for u, p in new.items() if old.get(u) != p}, sorted(set(old) - set(new))
