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

Who runs it: a platform that starts brokers as processes (the local one, in
its dynamic provider), by the name the broker's health spec gives it
(security.sasl_readiness: `once_healthy`, see platforms/descriptions.py);
platforms that start containers log in from the program instead
(kafka/broker_logins.py). The attempt, the wait and the words are every
platform's (mirrorstack.kafka.sasl_login); what is here: the spec's keys, the
broker's own log (its path the platform's), and the message that it was
stopped. The health spec's `sasl.*` keys say where and how; the passwords come
from the service's secret `health_secrets` ({user: password}), never from the
spec. The node's own settings are the spec's `bootstrap` and `client.*` (the
health check's).
"""
from __future__ import annotations

from collections.abc import Callable

from mirrorstack.kafka import sasl_login
from mirrorstack.kafka.sasl_login import authenticates  # noqa: F401 - the attempt local brokers use

PREFIX = "sasl."
CLIENT_PREFIX = "sasl.client."
WAIT_SECONDS = sasl_login.WAIT_SECONDS


def applies(spec: dict) -> bool:
    return f"{PREFIX}bootstrap" in spec


def _client(spec: dict) -> dict[str, str]:
    return {k.removeprefix(CLIENT_PREFIX): v for k, v in spec.items() if k.startswith(CLIENT_PREFIX)}


def refusals(spec: dict, credentials: dict[str, str], attempt: Callable = authenticates) -> dict[str, str]:
    """user → why, for each user the broker refuses on its client listener."""
    return sasl_login.refusals(spec[f"{PREFIX}bootstrap"], _client(spec), credentials, attempt)


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


def refusal_message(name: str, spec: dict, found: dict[str, str], log_line: str | None,
                    log_file: str = "its service.log") -> str:
    """What `up` says when a broker refuses the stack's users: the broker,
    each user and why, its own log's words, and where to look."""
    mechanism = spec.get(f"{CLIENT_PREFIX}sasl.mechanism", "")
    lines = [sasl_login.refused_line(name, mechanism, spec[f"{PREFIX}bootstrap"], found)]
    if log_line:
        lines.append(f"Its log: {log_line.strip()}")
    lines.append("It was stopped, so `up` goes no further (a roll stops here, before another broker goes down).")
    lines.append(sasl_login.fix_line(mechanism, log_file, set_again=True))
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
    def still() -> None:
        if not alive():
            raise RuntimeError(f"{name} exited while its clients' users were checked; see {log_file}")
    set_users(spec, credentials)
    found = sasl_login.wait_accepted(spec[f"{PREFIX}bootstrap"], _client(spec), credentials, timeout=timeout,
                                     attempt=attempt, still=still)
    if found:
        raise RuntimeError(refusal_message(name, spec, found, last_refusal(log_file), log_file))
