"""Self-healing's decisions, pure: when a FAILED connector or task of a Connect
group is restarted, when the supervisor gives up, and the metrics it serves.

The schedule is Strimzi's auto-restart: the first restart at once, then
`unit × (n² + n)` after the n-th (2, 6, 12, 20, 30, 42, 56 units...), never
more than `max_delay`, at most `max_restarts` in a row; a connector that has
stayed RUNNING for as long as its next back-off starts over at 0. A connector
that the topology holds paused or stopped, or that is PAUSED or STOPPED in
Connect (by hand, or by a failover switch, whose first step stops the flow's
connectors), is never restarted.

No pulumi: the supervisor runs it in the spark image too
(mirrorstack.connect.supervisor).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mirrorstack.connect.api import failed_parts

HELD_STATES = ("PAUSED", "STOPPED")  # Connect's target states a person or a failover chose


@dataclass(frozen=True)
class Schedule:
    unit_seconds: float = 60.0  # Strimzi's minute
    max_delay_seconds: float = 3600.0
    max_restarts: int = 10

    def delay(self, restarts: int) -> float:
        """Seconds after the `restarts`-th restart in a row before the next one."""
        return min(self.unit_seconds * (restarts * restarts + restarts), self.max_delay_seconds)


@dataclass
class Memory:
    """What the supervisor remembers of one connector between checks."""
    restarts: int = 0  # in a row, since it last stayed healthy
    last_restart: float | None = None
    healthy_since: float | None = None
    total: int = 0  # every restart since the supervisor started (the counter)
    failed_count: int = 0
    capped: bool = False
    held: bool = False


@dataclass(frozen=True)
class Decision:
    action: str  # "restart" | "wait" | "capped" | "held" | "healthy" | "absent"
    why: str = ""


def decide(status: dict | None, wanted: str, memory: Memory, now: float, schedule: Schedule) -> Decision:
    """What to do with one connector now, from its live status and the
    state the topology wants it in ("running", "paused", "stopped")."""
    if status is None:
        return Decision("absent", "not on this Connect group (yet)")
    state = (status.get("connector") or {}).get("state")
    if wanted != "running":
        return Decision("held", f"the topology holds the flow {wanted}")
    if state in HELD_STATES:
        return Decision("held", f"{state} in Connect (by hand or by a failover): left alone")
    failed = failed_parts(status)
    if not failed:
        return Decision("healthy")
    if memory.restarts >= schedule.max_restarts:
        return Decision("capped", f"still FAILED after {memory.restarts} restarts in a row (the cap), "
                                  f"left for a person: {'; '.join(failed)}")
    due = 0.0 if memory.last_restart is None else memory.last_restart + schedule.delay(memory.restarts)
    if now < due:
        return Decision("wait", f"next restart in {due - now:.0f} s: {'; '.join(failed)}")
    return Decision("restart", "; ".join(failed))


def remember(memory: Memory, decision: Decision, status: dict | None, now: float, schedule: Schedule) -> None:
    """Fold one check's outcome into `memory` (after a restart was made, if any)."""
    memory.failed_count = len(failed_parts(status))
    memory.held = decision.action == "held"
    memory.capped = decision.action == "capped"
    if decision.action == "restart":
        memory.restarts += 1
        memory.total += 1
        memory.last_restart = now
        memory.healthy_since = None
    elif decision.action == "healthy":
        memory.healthy_since = memory.healthy_since if memory.healthy_since is not None else now
        # Stayed up for as long as its next back-off: the next failure starts the schedule over.
        if memory.restarts and now - memory.healthy_since >= max(schedule.delay(memory.restarts), schedule.unit_seconds):
            memory.restarts = 0
    else:
        memory.healthy_since = None


REMIND_SECONDS = 600.0  # while checks keep failing, a line this often (the metrics count every one)


@dataclass
class ReadFailures:
    """Checks in a row that could not read Connect: said when they begin, at most
    once every REMIND_SECONDS while they last, and when they end (not one line a check)."""
    since: float | None = None
    count: int = 0
    said_at: float = 0.0

    def failed(self, now: float, why: str) -> str | None:
        """The line to log for a failed check at `now` (monotonic seconds), or None."""
        self.count += 1
        if self.since is None:
            self.since = self.said_at = now
            return (f"cannot read the connectors' status ({why}); trying again at every check, said again every "
                    f"{REMIND_SECONDS / 60:.0f} min while it lasts and once it reads again")
        if now - self.said_at >= REMIND_SECONDS:
            self.said_at = now
            return (f"still cannot read the connectors' status, for {now - self.since:.0f} s ({self.count} checks): "
                    f"{why}")
        return None

    def answered(self, now: float) -> str | None:
        """The line to log for a check that read the status, or None when the one before did too."""
        if self.since is None:
            return None
        line = f"reads the connectors' status again, after {self.count} failed checks in {now - self.since:.0f} s"
        self.since, self.count = None, 0
        return line


@dataclass
class Supervision:
    """Every connector of one Connect group the supervisor watches."""
    connect: str
    wanted: dict[str, str]  # connector → the topology's flow state
    schedule: Schedule
    memory: dict[str, Memory] = field(default_factory=dict)
    checks: int = 0
    check_errors: int = 0
    last_check: float = 0.0
    read_failures: ReadFailures = field(default_factory=ReadFailures)

    def of(self, name: str) -> Memory:
        return self.memory.setdefault(name, Memory())


RESTARTS_TOTAL = "mirrorstack_connector_restarts_total"
RESTARTS_IN_A_ROW = "mirrorstack_connector_restarts_in_a_row"
RESTART_CAP = "mirrorstack_connector_restart_cap"
CAP_REACHED = "mirrorstack_connector_restart_cap_reached"
FAILED_PARTS = "mirrorstack_connector_failed_parts"
HELD = "mirrorstack_connector_held"
LAST_CHECK = "mirrorstack_supervisor_last_check_timestamp_seconds"
CHECK_ERRORS = "mirrorstack_supervisor_check_errors_total"


@dataclass(frozen=True)
class Family:
    """One metric the supervisor serves: its samples as (label values, value)."""
    name: str
    kind: str  # "counter" | "gauge"
    help: str
    labels: tuple[str, ...]
    samples: list[tuple[tuple[str, ...], float]]


def metric_families(supervision: Supervision) -> list[Family]:
    """What the supervisor serves, as plain data (mirrorstack.connect.supervisor
    exposes it with prometheus_client): one series per connector and metric,
    so every connector shows 0 while all is well."""
    per_connector = [
        (RESTARTS_TOTAL, "counter", "Restarts of the connector's failed parts by the supervisor.", lambda m: m.total),
        (RESTARTS_IN_A_ROW, "gauge", "Restarts in a row, since the connector last stayed healthy.",
         lambda m: m.restarts),
        (RESTART_CAP, "gauge", "Restarts in a row after which the supervisor gives up.",
         lambda m: supervision.schedule.max_restarts),
        (CAP_REACHED, "gauge", "1 while the supervisor has given up on the connector (its cap reached).",
         lambda m: int(m.capped)),
        (FAILED_PARTS, "gauge", "FAILED parts (connector, tasks) at the last check.", lambda m: m.failed_count),
        (HELD, "gauge", "1 while the connector is paused or stopped (never restarted).", lambda m: int(m.held))]
    connectors = sorted(supervision.wanted)
    group = (supervision.connect,)
    return [*(Family(name, kind, text, ("connect", "connector"),
                     [((supervision.connect, c), value(supervision.of(c))) for c in connectors])
              for name, kind, text, value in per_connector),
            Family(LAST_CHECK, "gauge", "When the supervisor last read the connectors' status.", ("connect",),
                   [(group, supervision.last_check)]),
            Family(CHECK_ERRORS, "counter", "Checks that could not read Connect's status.", ("connect",),
                   [(group, supervision.check_errors)])]
