"""A broker's readiness as its clients see it: the stack's SASL users
authenticate on the broker's client listener. The health check asks over
INTERNAL (TLS, the node's certificate) and never sees a refused password;
this step runs after it and after the start steps, at every start, so also at
each step of a rolling restart: a broker that refuses a user fails `up`,
naming the broker and the user, and is stopped before a roll takes the next
broker down.

SCRAM users are set again first, as the node over INTERNAL, with the
passwords the stack holds: Kafka 4.3 drops every SCRAM user of a broker that
restarts with a credential deletion in its metadata log (until a snapshot
covers it; mirrorstack.kafka.scram_users says why), and setting them again
once the broker runs is what brings them back; a deletion left by an older
mirrorstack, or made by hand, would otherwise fail every later restart. On a
new cluster this creates the application users a moment before the ACL
resource does (with the same passwords). PLAIN users are in the broker's JAAS.

The health spec's `sasl.*` keys (mirrorstack.kafka.security.sasl_readiness)
say where and how; the passwords come from the service's secret
`health_secrets` ({user: password}), never from the spec. The node's own
settings are the spec's `bootstrap` and `client.*` (the health check's).
"""
from __future__ import annotations

import time
from collections.abc import Callable

PREFIX = "sasl."
CLIENT_PREFIX = "sasl.client."
ATTEMPT_SECONDS = 5.0  # one authentication (a refusal answers at once; this bounds a listener that hangs)
WAIT_SECONDS = 20.0  # a user just set reaches the broker within milliseconds: this is ample
AUTHENTICATION = -169  # librdkafka's KafkaError._AUTHENTICATION
SLICE_SECONDS = 0.25  # a metadata request's wait, between looks at the error callback


def applies(spec: dict) -> bool:
    return f"{PREFIX}bootstrap" in spec


def _client(spec: dict) -> dict[str, str]:
    return {k.removeprefix(CLIENT_PREFIX): v for k, v in spec.items() if k.startswith(CLIENT_PREFIX)}


def authenticates(address: str, client: dict[str, str], user: str, password: str,
                  timeout: float = ATTEMPT_SECONDS) -> str | None:
    """None when `user` authenticates on the broker at `address` and it
    answers a metadata request, else why not, in librdkafka's words. A
    refusal is known in a fraction of a second (librdkafka's error callback),
    not at `timeout`."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors = []
    admin = AdminClient({**client, "bootstrap.servers": address, "sasl.username": user, "sasl.password": password,
                         "log_level": 0, "error_cb": errors.append,
                         "socket.connection.setup.timeout.ms": int(timeout * 1000)})
    deadline = time.monotonic() + timeout
    while True:
        try:
            admin.list_topics(timeout=max(0.05, min(SLICE_SECONDS, deadline - time.monotonic())))
            return None
        except KafkaException as exc:
            admin.poll(0)  # serves error_cb
            refused = [e for e in errors if e.code() == AUTHENTICATION]
            if refused:
                return refused[-1].str()
            if time.monotonic() >= deadline:
                return exc.args[0].str()


def refusals(spec: dict, credentials: dict[str, str], attempt: Callable = authenticates) -> dict[str, str]:
    """user → why, for each user the broker refuses on its client listener."""
    client, address = _client(spec), spec[f"{PREFIX}bootstrap"]
    found = {user: attempt(address, client, user, password) for user, password in sorted(credentials.items())}
    return {user: why for user, why in found.items() if why is not None}


def set_scram_users(spec: dict, credentials: dict[str, str]) -> None:
    """Create or update each SCRAM user, as the node (a super user) over
    INTERNAL, as the ACL resource does; nothing for another mechanism."""
    from confluent_kafka.admin import AdminClient

    from mirrorstack.kafka.scram_users import scram_mechanism, set_users
    mechanism = scram_mechanism(spec.get(f"{CLIENT_PREFIX}sasl.mechanism"))
    if mechanism is None or not credentials:
        return
    node = {k.removeprefix("client."): v for k, v in spec.items() if k.startswith("client.")}
    set_users(AdminClient({**node, "bootstrap.servers": spec["bootstrap"], "log_level": 0}), mechanism, credentials,
              spec["bootstrap"])


def refusal_message(name: str, spec: dict, found: dict[str, str], log_line: str | None) -> str:
    """What `up` says when a broker refuses the stack's users: the broker,
    each user and why, its own log's words, and where to look."""
    mechanism = spec.get(f"{CLIENT_PREFIX}sasl.mechanism", "")
    users = "; ".join(f"{user} ({why})" for user, why in sorted(found.items()))
    lines = [f"{name} refuses the stack's {mechanism} user(s) on its client listener {spec[f'{PREFIX}bootstrap']}: "
             f"{users}."]
    if log_line:
        lines.append(f"Its log: {log_line.strip()}")
    lines.append("It was stopped, so `up` goes no further (a roll stops here, before another broker goes down).")
    if mechanism.startswith("SCRAM-"):
        lines.append("Each was set again as the node just before (same password); fix: look in the broker's log "
                     "why it still refuses (its `sasl.enabled.mechanisms` and CLIENT listener settings), then "
                     "`pulumi up`.")
    else:
        lines.append("fix: check the users in the broker's secrets/broker.properties (its JAAS), then `pulumi up`.")
    return "\n".join(lines)


def last_refusal(log_file: str) -> str | None:
    """The broker log's last line about a failed authentication."""
    try:
        with open(log_file, errors="replace") as log:
            lines = [line for line in log if "Failed authentication" in line]
    except OSError:
        return None
    return lines[-1] if lines else None


def wait_accepted(name: str, spec: dict, credentials: dict[str, str], *, alive: Callable[[], bool], log_file: str,
                  timeout: float = WAIT_SECONDS, attempt: Callable = authenticates,
                  set_users: Callable = set_scram_users) -> None:
    """Set the SCRAM users again, then wait until the broker accepts every
    user; raises with `refusal_message` when it still refuses one after
    `timeout`."""
    set_users(spec, credentials)
    deadline = time.monotonic() + timeout
    while True:
        found = refusals(spec, credentials, attempt)
        if not found:
            return
        if not alive():
            raise RuntimeError(f"{name} exited while its clients' users were checked; see {log_file}")
        if time.monotonic() >= deadline:
            raise RuntimeError(refusal_message(name, spec, found, last_refusal(log_file)))
        time.sleep(1.0)
