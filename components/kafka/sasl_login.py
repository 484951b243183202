"""Whether a broker lets the stack's SASL users in on its client listener:
the readiness every platform adds to a secured broker's own, after each
start, so a roll stops at a broker that refuses a user and `up` fails naming
both. The broker's own health check asks over INTERNAL (TLS, the node's
certificate) and never sees a refused password.

Where it runs: the local platform, in the broker's start
(kafka/sasl_check.py); docker and kubernetes, in the program, right
after the container or pod (re)started (kafka/broker_logins.py: the client
listener published on 127.0.0.1, or a port-forward). The same attempt, the
same wait and the same words everywhere: here.

Pure: no pulumi (librdkafka's admin client).
"""
from __future__ import annotations

import time
from collections.abc import Callable

ATTEMPT_SECONDS = 5.0  # one authentication (a refusal answers at once; this bounds a listener that hangs)
WAIT_SECONDS = 20.0  # a user just set reaches the broker within milliseconds: this is ample
AUTHENTICATION = -169  # librdkafka's KafkaError._AUTHENTICATION
SLICE_SECONDS = 0.25  # a metadata request's wait, between looks at the error callback
PAUSE_SECONDS = 1.0  # between two rounds of attempts while a broker still refuses
STATISTICS_MS = 100  # how often librdkafka reports the brokers it knows (an authenticated connection's proof)


def authenticates(address: str, client: dict[str, str], user: str, password: str,
                  timeout: float = ATTEMPT_SECONDS) -> str | None:
    """None when `user` authenticates on the broker at `address`, else why not,
    in librdkafka's words. A refusal is known in a fraction of a second
    (librdkafka's error callback), not at `timeout`.

    Authenticated: a metadata request answered, or the cluster's brokers
    learned from one (librdkafka's statistics list them): a broker answers
    metadata only after the login. The second matters through a tunnel: the
    broker advertises its name on the stack's network, which does not resolve
    here, and librdkafka (2.10+) drops the bootstrap connection once it has
    learned the brokers, so a request of ours may find no broker left."""
    import json

    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors, learned = [], []

    def statistics(document: str) -> None:
        brokers = json.loads(document).get("brokers") or {}
        learned.extend(name for name, broker in brokers.items() if broker.get("nodeid", -1) >= 0)

    admin = AdminClient({**client, "bootstrap.servers": address, "sasl.username": user, "sasl.password": password,
                         "log_level": 0, "error_cb": errors.append, "stats_cb": statistics,
                         "statistics.interval.ms": STATISTICS_MS,
                         "socket.connection.setup.timeout.ms": int(timeout * 1000)})
    deadline = time.monotonic() + timeout
    while True:
        try:
            admin.list_topics(timeout=max(0.05, min(SLICE_SECONDS, deadline - time.monotonic())))
            return None
        except KafkaException as exc:
            admin.poll(0)  # serves error_cb and stats_cb
            refused = [e for e in errors if e.code() == AUTHENTICATION]
            if refused:
                return refused[-1].str()
            if learned:
                return None
            if time.monotonic() >= deadline:
                return _why(exc.args[0].str(), errors)


def _why(failed: str, errors: list) -> str:
    """librdkafka's last words on why no answer came (a TLS handshake, a refused
    connection), beside its summary of the failed request."""
    told = [e.str() for e in errors if "brokers are down" not in e.str()]
    return f"{failed}; {told[-1]}" if told else failed


def refusals(address: str, client: dict[str, str], credentials: dict[str, str],
             attempt: Callable = authenticates) -> dict[str, str]:
    """user → why, for each user the broker at `address` refuses."""
    found = {user: attempt(address, client, user, password) for user, password in sorted(credentials.items())}
    return {user: why for user, why in found.items() if why is not None}


def wait_accepted(address: str, client: dict[str, str], credentials: dict[str, str], *,
                  timeout: float = WAIT_SECONDS, attempt: Callable = authenticates,
                  still: Callable[[], None] = lambda: None) -> dict[str, str]:
    """{} once the broker accepted every user (each once: a connection that
    failed on its way, e.g. through a tunnel, is tried again, a user let in
    is not); else the users it still refuses (user → why) after `timeout`.
    `still()` runs between rounds and may raise (the broker died meanwhile)."""
    deadline, pending = time.monotonic() + timeout, dict(credentials)
    while True:
        found = refusals(address, client, pending, attempt)
        if not found or time.monotonic() >= deadline:
            return found
        pending = {user: pending[user] for user in found}
        still()
        time.sleep(PAUSE_SECONDS)


def refused_line(broker: str, mechanism: str, where: str, found: dict[str, str]) -> str:
    """The first line of what `up` says: the broker, each user and why."""
    users = "; ".join(f"{user} ({why})" for user, why in sorted(found.items()))
    return f"{broker} refuses the stack's {mechanism} user(s) on its client listener {where}: {users}."


def fix_line(mechanism: str, logs: str, set_again: bool) -> str:
    """What to do, by mechanism: SCRAM users live in the metadata log, PLAIN's in the broker's JAAS."""
    if mechanism.startswith("SCRAM-"):
        said = "Each was set again as the node just before (same password); " if set_again else ""
        return (f"{said}fix: look in the broker's log ({logs}) why it still refuses (its `sasl.enabled.mechanisms` "
                "and CLIENT listener settings), then `pulumi up`.")
    return (f"fix: check the users in the broker's secrets/broker.properties (its JAAS) and its log ({logs}), "
            "then `pulumi up`.")
