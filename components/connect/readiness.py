"""Connect's readiness, the check a Connect worker's health spec names
(`check`, resolved by name where the platform runs it: the local platform's
start of a worker, in its dynamic provider's process): the REST API answers
with the MirrorMaker 2 plugins and every connector and task of the group runs.
Containers run the same rule as a shell probe (platforms/containers.py)."""
from __future__ import annotations

from mirrorstack.connect.api import ConnectClient, ConnectError, basic_auth
from mirrorstack.platforms.descriptions import NotReady, first_few

MIRROR_CONNECTOR_CLASSES = (
    "org.apache.kafka.connect.mirror.MirrorSourceConnector",
    "org.apache.kafka.connect.mirror.MirrorCheckpointConnector",
    "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
)


def rest_credentials(credentials_file: str) -> tuple[str, str]:
    """(user, password) from a Connect basic-auth credentials file (`user: password`)."""
    user, _, password = open(credentials_file).read().strip().splitlines()[0].partition(":")
    return user.strip(), password.strip()


# What holds a worker reading its internal topics for minutes (seen after a roll of the group's
# Kafka cluster, 2026-11-29: an exactly-once task's transaction left open on the offsets topic).
STUCK_STARTING_HINT = (" (if this lasts: a transaction left open on the group's offsets topic may hold it; "
                       "`kafka-transactions.sh describe-producers` finds it, `abort` ends it: "
                       "docs/operations/day-2.md)")

# Deliberate states a connector or task is not started from (failover stops flows).
SETTLED_ELSEWHERE = ("PAUSED", "STOPPED")


def connect_ready(rest_url: str, timeout: float = 5.0, auth_file: str | None = None) -> bool:
    """Connect's REST API answers, lists the three MirrorMaker 2 connectors
    (plugin scanning is the slow part of a worker's start), and every connector
    of the group and its tasks run (the group rebalanced after a restart; a new
    group without connectors passes)."""
    auth = rest_credentials(auth_file) if auth_file else None
    client = ConnectClient(rest_url, headers=basic_auth(auth)).quick(timeout)  # a probe: no retries
    # Until its herder has read the group's internal topics a worker lists no connectors at all,
    # which would pass below as a group without any: its /health says whether it got there.
    try:
        health = client.health()
    except ConnectError as exc:
        if exc.status != 404:  # 404: Jetty before Connect's resources (or a worker without /health)
            raise
    else:
        status, message = health.get("status"), str(health.get("message"))
        if status != "healthy":
            hint = STUCK_STARTING_HINT if "internal topics" in message else ""
            raise NotReady(f"answers; the worker is {status}: {message}{hint}")
    try:
        plugins = client.plugins()
    except ConnectError as exc:
        if exc.status != 404:
            raise
        # Jetty answers before Connect's resources exist (a whole HTML page): one line instead
        raise NotReady("REST server up (HTTP 404 on /connector-plugins); waiting for Connect's resources") from None
    if not set(MIRROR_CONNECTOR_CLASSES) <= set(plugins):
        return False
    try:
        expanded = client.expanded_status()
    except ConnectError as exc:
        if exc.status is None:
            raise
        # e.g. 409 while the group rebalances
        raise NotReady(f"answers; the group is not ready (HTTP {exc.status} on /connectors)") from None
    waiting = not_running(expanded)
    if waiting:
        raise NotReady(f"answers; waiting for {len(waiting)} connectors/tasks to run ({first_few(waiting)})")
    return True


def not_running(expanded: dict) -> list[str]:
    """From `GET /connectors?expand=status`: `name[/task]: STATE` of each
    connector or task neither RUNNING nor deliberately paused/stopped."""
    out = []
    for name, entry in sorted(expanded.items()):
        status = entry.get("status") or {}
        states = [(name, (status.get("connector") or {}).get("state"))]
        states += [(f"{name}/{t.get('id')}", t.get("state")) for t in status.get("tasks") or []]
        out += [f"{what}: {state}" for what, state in states if state != "RUNNING" and state not in SETTLED_ELSEWHERE]
    return out


def check(spec: dict, since_ms: int = 0) -> bool:
    """A worker's health spec (kind `connect`: its `url`, `auth_file`) as a check."""
    return connect_ready(spec["url"], auth_file=spec.get("auth_file"))
