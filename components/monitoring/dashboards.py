"""Grafana dashboards for mirrorstack, built with grafana-foundation-sdk.

Two dashboards, both on a `${datasource}` Prometheus variable:
- overview: every MM2 flow at once, plus Connect and broker health;
- flow: one or more flows (`$flow` variable) by topic, with their connectors,
  checkpoints and the JVMs of the Connect cluster that runs them.

Queries use only the series in components/monitoring/metrics.py. Every query must
return data on a healthy stack (integration tests run each one), so states are
counted over all statuses instead of selecting `status="failed"`.
"""
from __future__ import annotations

import json
import re

from grafana_foundation_sdk.builders import common, dashboard, prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import units
from grafana_foundation_sdk.models.dashboard import (
    DataSourceRef,
    DataTransformerConfig,
    Threshold,
    ThresholdsMode,
    VariableRefresh,
    VariableSort,
)
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from mirrorstack.monitoring import metrics as m

# Panels and queries point at the datasource variable, so one JSON works with any Prometheus.
PROM = DataSourceRef(type_val="prometheus", uid="${datasource}")
TAGS = ["mirrorstack"]
UP = "up"  # Prometheus' own scrape-health series (not exported by Kafka)

# Variables are always matched with =~: `$flow` is multi-valued and expands to a regex.
FLOW = 'flow=~"$flow"'
# MM2 connector names are `<flow>.<MM2 class>` (components/mirror/connectors.py); `\\.` is a
# literal dot once PromQL has unescaped the string.
FLOW_CONNECTORS = 'connector=~"$flow\\\\..*"'
CONNECT = 'role="connect"'
BROKER = 'role="broker"'


def sel(metric: str, *matchers: str) -> str:
    """`metric{matchers}`, merged into the selector a constant may already carry
    (m.JVM_HEAP_USED is `jvm_memory_used_bytes{area="heap"}`)."""
    if not matchers:
        return metric
    if metric.endswith("}"):
        return metric[:-1] + "," + ",".join(matchers) + "}"
    return metric + "{" + ",".join(matchers) + "}"


def rate(metric: str, *matchers: str) -> str:
    return f"rate({sel(metric, *matchers)}[$__rate_interval])"


def on_flow_workers(expr: str) -> str:
    """Keep only series of the Connect cluster(s) running the selected flows'
    connectors: JVM series carry `connect` but no flow."""
    return f"{expr} and on (connect) group by (connect) ({sel(m.TASK_STATUS, FLOW_CONNECTORS)})"


def query(expr: str, legend: str, ref_id: str = "A") -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref_id).datasource(PROM)


def _targets(panel, queries: list[tuple[str, str]]):
    for ref_id, (expr, legend) in zip("ABCDEFGH", queries):
        panel = panel.with_target(query(expr, legend, ref_id))
    return panel


def graph(title: str, unit: str, *queries: tuple[str, str], span: int = 12) -> timeseries.Panel:
    panel = timeseries.Panel().title(title).datasource(PROM).unit(unit).span(span).height(8)
    return _targets(panel, list(queries))


def single_stat(title: str, *queries: tuple[str, str], span: int = 6,
                red_at: float | None = None) -> stat.Panel:
    panel = (stat.Panel().title(title).datasource(PROM).unit(units.Short).span(span).height(6)
             .reduce_options(common.ReduceDataOptions().calcs(["lastNotNull"])))
    if red_at is not None:
        panel = panel.thresholds(dashboard.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(
            [Threshold(value=None, color="green"), Threshold(value=red_at, color="red")]))
    return _targets(panel, list(queries))


def instant_table(title: str, *queries: tuple[str, str], span: int = 12) -> table.Panel:
    panel = table.Panel().title(title).datasource(PROM).span(span).height(8).show_header(True)
    for ref_id, (expr, legend) in zip("ABCDEFGH", queries):
        panel = panel.with_target(query(expr, legend, ref_id).instant().format(PromQueryFormat.TABLE))
    if len(queries) > 1:
        # One row per label set, one column per query.
        panel = panel.with_transformation(DataTransformerConfig(id_val="merge", options={}))
    return panel


def _board(uid: str, title: str, rows: list[tuple[str, list]]) -> dashboard.Dashboard:
    """Dashboard skeleton; rows are added flat (`Row.with_panel` would collapse
    them) and every panel gets a unique id."""
    board = (dashboard.Dashboard(title).uid(uid).tags(TAGS).refresh("30s").time("now-1h", "now")
             .timezone("browser")
             .with_variable(dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus")))
    next_id = 1
    for row_title, panels in rows:
        board = board.with_row(dashboard.Row(row_title).id(next_id))
        next_id += 1
        for panel in panels:
            board = board.with_panel(panel.id(next_id))
            next_id += 1
    return board


def delivery_panels() -> list:
    """The continuous validator's figures: what arrived, what did not, how late, and each flow's RPO."""
    target_topic = "{{target}} {{topic}}"
    latency = f"sum by (le, target, topic) ({rate(m.DELIVERY_LATENCY + '_bucket')})"
    return [
        graph("Records confirmed on the target/s", units.RequestsPerSecond,
              (f"sum by (target, topic) ({rate(m.DELIVERY_CONFIRMED)})", target_topic)),
        graph("End-to-end latency (source timestamp to copy)", units.Seconds,
              (f"histogram_quantile(0.5, {latency})", f"{target_topic} p50"),
              (f"histogram_quantile(0.99, {latency})", f"{target_topic} p99")),
        graph("RPO per flow: age of the oldest record not yet copied", units.Seconds,
              (f"max by (flow) ({m.DELIVERY_RPO_SECONDS})", "{{flow}}")),
        instant_table("Delivery in the last hour",
                      (f"sum by (target, topic) (increase({m.DELIVERY_MISSING}[1h]))", "missing"),
                      (f"sum by (target, topic) (increase({m.DELIVERY_DUPLICATES}[1h]))", "duplicates"),
                      (f"sum by (target, topic) (increase({m.DELIVERY_EXTRAS}[1h]))", "extras"),
                      (f"sum by (target, topic) (increase({m.DELIVERY_CONFIRMED}[1h]))", "confirmed")),
    ]


def overview_dashboard(delivery: bool = False) -> dict:
    """`delivery`: with the continuous validator's row (its series exist only where it runs)."""
    by_flow = [
        graph("Replicated records/s per flow", units.RequestsPerSecond,
              (f"sum by (flow) ({rate(m.MM2_RECORDS)})", "{{flow}}")),
        graph("Replicated bytes/s per flow", units.BytesPerSecondSI,
              (f"sum by (flow) ({rate(m.MM2_BYTES)})", "{{flow}}")),
        graph("Max replication latency per flow", units.Milliseconds,
              (f"max by (flow) ({m.MM2_LATENCY_MAX})", "{{flow}}")),
        graph("Max record age per flow", units.Milliseconds,
              (f"max by (flow) ({m.MM2_RECORD_AGE_MAX})", "{{flow}}")),
        instant_table("Flows",
                      (f"max by (flow) ({m.MM2_LATENCY_MAX})", "max latency (ms)"),
                      (f"max by (flow) ({m.MM2_RECORD_AGE_MAX})", "max record age (ms)"),
                      (f"sum by (flow) ({rate(m.MM2_RECORDS)})", "records/s"), span=24),
    ]
    connect = [
        single_stat("Connectors by state", (f"count by (status) ({m.CONNECTOR_STATUS})", "{{status}}")),
        single_stat("Connect workers up", (f"sum by (connect) ({sel(UP, CONNECT)})", "{{connect}}")),
        graph("Tasks per connector", units.Short,
              (f"sum by (connector) ({m.CONNECTOR_RUNNING_TASKS})", "{{connector}} running"),
              (f"sum by (connector) ({m.CONNECTOR_FAILED_TASKS})", "{{connector}} failed")),
    ]
    brokers = [
        single_stat("Under-replicated partitions",
                    (f"sum by (cluster) ({sel(m.UNDER_REPLICATED, BROKER)})", "{{cluster}}"),
                    span=24, red_at=1),
    ]
    rows = [("Flows", by_flow), *([("Proof of delivery", delivery_panels())] if delivery else []),
            ("Kafka Connect", connect), ("Brokers", brokers)]
    board = _board("mirrorstack-overview", "mirrorstack: overview", rows)
    return _plain(board.build())


def flow_dashboard() -> dict:
    topics = [
        graph("Replication latency per topic", units.Milliseconds,
              (f"avg by (flow, topic) ({sel(m.MM2_LATENCY_AVG, FLOW)})", "{{flow}} {{topic}} avg"),
              (f"max by (flow, topic) ({sel(m.MM2_LATENCY_MAX, FLOW)})", "{{flow}} {{topic}} max")),
        graph("Record age per topic", units.Milliseconds,
              (f"avg by (flow, topic) ({sel(m.MM2_RECORD_AGE_AVG, FLOW)})", "{{flow}} {{topic}} avg"),
              (f"max by (flow, topic) ({sel(m.MM2_RECORD_AGE_MAX, FLOW)})", "{{flow}} {{topic}} max")),
        graph("Records/s per topic", units.RequestsPerSecond,
              (f"sum by (flow, topic) ({rate(m.MM2_RECORDS, FLOW)})", "{{flow}} {{topic}}")),
        graph("Bytes/s per topic", units.BytesPerSecondSI,
              (f"sum by (flow, topic) ({rate(m.MM2_BYTES, FLOW)})", "{{flow}} {{topic}}")),
    ]
    connectors = [
        graph("Tasks", units.Short,
              (f"sum by (connector) ({sel(m.CONNECTOR_RUNNING_TASKS, FLOW_CONNECTORS)})", "{{connector}} running"),
              (f"sum by (connector) ({sel(m.CONNECTOR_FAILED_TASKS, FLOW_CONNECTORS)})", "{{connector}} failed")),
        instant_table("Connector status",
                      (f"max by (connector, status) ({sel(m.CONNECTOR_STATUS, FLOW_CONNECTORS)})", "{{status}}")),
    ]
    checkpoints = [
        graph("Checkpoint latency per group", units.Milliseconds,
              (f"max by (flow, group) ({sel(m.MM2_CHECKPOINT_LATENCY_MAX, FLOW)})", "{{flow}} {{group}} max"),
              (f"avg by (flow, group) ({sel(m.MM2_CHECKPOINT_LATENCY_AVG, FLOW)})", "{{flow}} {{group}} avg"),
              span=24),
    ]
    workers = [
        graph("Heap used / max", units.BytesIEC,
              (on_flow_workers(f"sum by (connect, instance) ({sel(m.JVM_HEAP_USED, CONNECT)})"), "{{instance}} used"),
              (on_flow_workers(f"sum by (connect, instance) ({sel(m.JVM_HEAP_MAX, CONNECT)})"), "{{instance}} max")),
        # seconds of GC per second: the fraction of time spent collecting.
        graph("GC time", units.PercentUnit,
              (on_flow_workers(f"sum by (connect, instance) ({rate(m.JVM_GC_SECONDS, CONNECT)})"), "{{instance}}")),
    ]
    board = (_board("mirrorstack-flow", "mirrorstack: flow",
                    [("Replication", topics), ("Connectors", connectors), ("Checkpoints", checkpoints),
                     ("Connect workers", workers)])
             .with_variable(dashboard.QueryVariable("flow").label("Flow").datasource(PROM)
                            .query(f"label_values({m.MM2_RECORDS}, flow)")
                            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
                            .sort(VariableSort.ALPHABETICAL_ASC)
                            .multi(True).include_all(True)))
    return _plain(board.build())


def to_json(board: dict) -> str:
    return json.dumps(board, cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def dashboards(delivery: bool = False) -> dict[str, str]:
    """File name → dashboard JSON, e.g. for a Grafana provisioning directory (`delivery`: the stack
    runs the continuous validator)."""
    return {"mirrorstack-overview.json": to_json(overview_dashboard(delivery)),
            "mirrorstack-flow.json": to_json(flow_dashboard())}


def _plain(board) -> dict:
    """Plain JSON data (dicts, lists, strings) from built SDK objects."""
    return json.loads(json.dumps(board, cls=JSONEncoder))


def dashboard_queries(board) -> list[str]:
    """Every PromQL expression of a dashboard: panel targets (rows' nested
    panels included) and query-variable queries."""
    data = _plain(board)
    exprs: list[str] = []

    def walk(panels: list[dict]) -> None:
        for panel in panels:
            exprs.extend(t["expr"] for t in panel.get("targets") or [] if t.get("expr"))
            walk(panel.get("panels") or [])

    walk(data.get("panels") or [])
    for var in (data.get("templating") or {}).get("list") or []:
        if var.get("type") == "query":
            q = var.get("query")
            exprs.append(q["query"] if isinstance(q, dict) else q)
    return exprs


_CONCRETE = {"flow": ".+", "__rate_interval": "1m", "__interval": "1m", "__range": "5m"}
_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(.+?)\s*,\s*(\w+)\s*\)\s*$")


def concrete_query(expr: str) -> str:
    """`expr` as Prometheus can run it: variables replaced by catch-all values,
    and a `label_values(metric, label)` variable query turned into the PromQL
    that returns the same label values."""
    lv = _LABEL_VALUES.match(expr)
    if lv:
        expr = f"group by ({lv.group(2)}) ({lv.group(1)})"
    # Unknown variables are left alone, so they show up as an unrunnable `$`.
    return _VAR.sub(lambda v: _CONCRETE.get(v.group(1) or v.group(2), v.group(0)), expr)
