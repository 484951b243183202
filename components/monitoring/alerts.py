"""Prometheus alert rules for replication, written against components/monitoring/metrics.py.

Each rule keeps what it measures (`base`) apart from its `condition`, so tests
can check that every base selects real series on a healthy stack while the
alert itself stays quiet; bases are written to return a series (0) when all is
well rather than nothing.
"""
from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import yaml

from mirrorstack.monitoring import metrics as m

GROUP = "mirrorstack"


@dataclass(frozen=True)
class AlertRule:
    name: str
    base: str
    condition: str
    for_: str
    severity: str
    summary: str
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def expr(self) -> str:
        return f"({self.base}) {self.condition}"


def _any(patterns: Sequence[str]) -> str:
    return "|".join(patterns).replace("\\", "\\\\").replace('"', '\\"')


def stalled_rule(flow, window: str) -> AlertRule:
    """No record replicated by `flow` for `window` while the topics it replicates
    grew on its source (per flow: the flow's own topic regexes)."""
    exclude = f', topic!~"{_any(flow.topics_exclude)}"' if flow.topics_exclude else ""
    growth = f'sum(rate({m.TOPIC_MESSAGES_IN}{{cluster="{flow.source}", topic=~"{_any(flow.topics)}"{exclude}}}[{window}]))'
    return AlertRule(
        "MirrorReplicationStalled", f'sum(increase({m.MM2_RECORDS}{{flow="{flow.name}"}}[{window}])) or vector(0)',
        f"== 0 and on () ({growth} > 0)", "0m", "critical",
        f"Flow {flow.name} replicated nothing for {window} while its source topics grew", {"flow": flow.name})


def alert_rules(flows: Sequence, *, latency_threshold_ms: int = 30_000, stalled_minutes: int = 10,
                failed_for: str = "1m", latency_for: str = "5m", worker_down_for: str = "1m") -> list[AlertRule]:
    by_connector = "connector, connect, cluster"
    return [
        AlertRule("MirrorConnectorFailed",
                  f'count by ({by_connector}) ({m.CONNECTOR_STATUS}{{status="failed"}}) '
                  f"or (count by ({by_connector}) ({m.CONNECTOR_STATUS}) * 0)",
                  "> 0", failed_for, "critical", "Connector {{ $labels.connector }} is FAILED"),
        AlertRule("MirrorTaskFailed", f"max by ({by_connector}) ({m.CONNECTOR_FAILED_TASKS})", "> 0",
                  failed_for, "critical", "{{ $value }} task(s) of {{ $labels.connector }} FAILED"),
        AlertRule("MirrorReplicationLatencyHigh", f"max by (flow, topic) ({m.MM2_LATENCY_MAX})",
                  f"> {latency_threshold_ms}", latency_for, "warning",
                  "Flow {{ $labels.flow }}, topic {{ $labels.topic }}: replication latency {{ $value }} ms"),
        *(stalled_rule(flow, f"{stalled_minutes}m") for flow in flows),
        AlertRule("ConnectWorkerDown", 'up{role="connect"}', "== 0", worker_down_for, "critical",
                  "Connect worker {{ $labels.instance }} of {{ $labels.connect }} is down"),
        AlertRule(RESTART_CAP_ALERT, f"max by (connector, connect, cluster) ({m.RESTART_CAP_REACHED})", "> 0",
                  "0m", "critical", "The supervisor of {{ $labels.connect }} gave up restarting "
                  "{{ $labels.connector }} (its restart cap): find the cause in the worker log, fix it, then "
                  "pulumi up (or POST .../restart?includeTasks=true&onlyFailed=true)"),
        AlertRule("ConnectSupervisorDown", 'up{role="supervisor"}', "== 0", worker_down_for, "warning",
                  "The self-healing supervisor of {{ $labels.connect }} is down: failed connectors wait for a "
                  "person"),
    ]


RESTART_CAP_ALERT = "MirrorConnectorRestartCapReached"
MISSING_ALERT, RPO_ALERT = "MirrorRecordsMissing", "MirrorRecoveryPointObjectiveMissed"
VALIDATOR_DOWN_ALERT, VALIDATION_STALLED_ALERT = "ContinuousValidatorDown", "ContinuousValidationStalled"
MISSING_HELD = "1h"  # a record found missing keeps its alert firing this long


def delivery_rules(flows: Sequence, *, trigger_seconds: float, down_for: str = "1m") -> list[AlertRule]:
    """The continuous validator's: records that never arrived, each flow's RPO above its
    `rpo_seconds`, the validator down or its batches stopped."""
    # The missing records counted within MISSING_HELD (a target topic new since then: all of its).
    missing = f"{m.DELIVERY_MISSING} - ({m.DELIVERY_MISSING} offset {MISSING_HELD} or {m.DELIVERY_MISSING} * 0)"
    stalled_after = max(60, int(10 * trigger_seconds))
    return [
        AlertRule(MISSING_ALERT, f"sum by (target, topic) ({missing})", "> 0", "0m", "critical",
                  "{{ $value }} record(s) for {{ $labels.target }}/{{ $labels.topic }} did not arrive within the "
                  "validation window: the validator's log names each (source topic, partition, offset)"),
        *(AlertRule(RPO_ALERT, f'max by (flow) ({m.DELIVERY_RPO_SECONDS}{{flow="{flow.name}"}})',
                    f"> {flow.rpo_seconds:g}", "0m", "critical",
                    f"Flow {flow.name}: its oldest record not yet on the target is {{{{ $value }}}}s old, above "
                    f"its RPO objective of {flow.rpo_seconds:g}s", {"flow": flow.name})
          for flow in flows if flow.rpo_seconds is not None),
        AlertRule(VALIDATOR_DOWN_ALERT, 'up{role="validator"}', "== 0", down_for, "critical",
                  "The continuous validator is down: no record's delivery is being checked"),
        AlertRule(VALIDATION_STALLED_ALERT, f"time() - max({m.DELIVERY_LAST_BATCH})", f"> {stalled_after}", "2m",
                  "warning", "The continuous validator's last batch ended {{ $value }}s ago: its Spark query is "
                  "stuck or failing (see its log)"),
    ]


CERT_EXPIRY = "mirrorstack_tls_certificate_expiry_timestamp_seconds"
CERT_RENEWAL_DUE = "MirrorstackCertificateRenewalDue"


@dataclass(frozen=True)
class RecordingRule:
    record: str
    expr: str
    labels: Mapping[str, str] = field(default_factory=dict)


def _unix(iso: str) -> int:
    return int(datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp())


def certificate_expiry_records(cluster: str, summary: Mapping) -> list[RecordingRule]:
    """The expiry of each of a cluster's certificates (the `certificates`
    output of one cluster) as a constant series: Prometheus cannot read a PEM."""
    certs = {"ca": summary["ca"]["not_after"], **{n: c["not_after"] for n, c in summary["certificates"].items()}}
    return [RecordingRule(CERT_EXPIRY, f"vector({_unix(expiry)})", {"cluster": cluster, "certificate": name})
            for name, expiry in certs.items()]


def certificate_rule(cluster: str, renew_before_days: int) -> AlertRule:
    """A certificate of `cluster` is inside its renewal window: the next `up` renews it."""
    return AlertRule(CERT_RENEWAL_DUE, f'{CERT_EXPIRY}{{cluster="{cluster}"}} - time()',
                     f"< {renew_before_days * 86400}", "0m", "warning",
                     "Certificate {{ $labels.certificate }} of cluster {{ $labels.cluster }} expires in "
                     "{{ $value | humanizeDuration }}: run pulumi up to renew it", {"cluster": cluster})


def alert_rules_file(rules: Sequence[AlertRule], records: Sequence[RecordingRule] = ()) -> str:
    # Recording rules first: a group evaluates in order, so the alerts see this round's values.
    return yaml.safe_dump({"groups": [{"name": GROUP, "rules": [
        *({"record": r.record, "expr": r.expr, "labels": dict(r.labels)} for r in records),
        *({"alert": r.name, "expr": r.expr, "for": r.for_, "labels": {"severity": r.severity, **r.labels},
           "annotations": {"summary": r.summary}} for r in rules)]}]}, sort_keys=False)


DRILL_RPO_RECORDS = "mirrorstack_failover_drill_rpo_records"
DRILL_RPO_SECONDS = "mirrorstack_failover_drill_rpo_seconds"
DRILL_RTO_SECONDS = "mirrorstack_failover_drill_rto_seconds"
DRILL_PASSED = "mirrorstack_failover_drill_passed"
DRILL_LAST_PASS = "mirrorstack_failover_drill_last_pass_timestamp_seconds"
DRILL_OVERDUE = "MirrorstackFailoverDrillOverdue"


def drill_records(report: Mapping | None) -> list[RecordingRule]:
    """The last failover drill's figures (the `failover` output's `drill`) as constant series: it ran
    during an `up`, and Prometheus keeps them from one `up` to the next. None before the first drill."""
    if not report:
        return []
    labels = {"from": report["from"], "to": report["to"], "run": report["run"]}
    rpo = report.get("rpo") or {}
    records = [RecordingRule(name, f"vector({float(value or 0):g})", labels) for name, value in (
        (DRILL_RPO_RECORDS, rpo.get("records")), (DRILL_RPO_SECONDS, rpo.get("seconds")),
        (DRILL_RTO_SECONDS, report.get("rto_seconds")), (DRILL_PASSED, 1 if report.get("passed") else 0))]
    if report.get("last_passed_at"):
        stamp = int(datetime.datetime.fromisoformat(report["last_passed_at"]).timestamp())
        records.append(RecordingRule(DRILL_LAST_PASS, f"vector({stamp})", {"from": report["from"], "to": report["to"]}))
    return records


def drill_rule(pass_within_days: float) -> AlertRule:
    """No drill passed within `pass_within_days` (or none ever did): run one."""
    return AlertRule(DRILL_OVERDUE, f"time() - (max({DRILL_LAST_PASS}) or vector(0))",
                     f"> {int(pass_within_days * 86400)}", "0m", "warning",
                     "No failover drill passed for {{ $value | humanizeDuration }}: run one (set failover.drill.run "
                     "anew and run pulumi up)")

