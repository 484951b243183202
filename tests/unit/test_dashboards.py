"""The generated Grafana dashboards: structure, the metrics contract, variables
and PromQL syntax (promtool). Integration tests run the same queries against a
real Prometheus."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mirrorstack import toolchain
from mirrorstack.monitoring import dashboards as gd
from mirrorstack.monitoring import metrics

ROOT = Path(__file__).resolve().parents[2]

BOARDS = {"mirrorstack-overview": gd.overview_dashboard, "mirrorstack-flow": gd.flow_dashboard}
# Bare series names of the contract (JVM constants carry an `{area="heap"}` selector),
# plus Prometheus' own `up`.
KNOWN_SERIES = {value.split("{")[0] for name, value in vars(metrics).items()
                if name.isupper() and isinstance(value, str)} | {"up"}


def all_panels(board: dict) -> list[dict]:
    out = []
    for panel in board["panels"]:
        out.append(panel)
        out.extend(panel.get("panels") or [])
    return out


def data_panels(board: dict) -> list[dict]:
    return [p for p in all_panels(board) if p["type"] != "row"]


def all_queries() -> list[str]:
    return [q for build in BOARDS.values() for q in gd.dashboard_queries(build())]


# PromQL words that are not series names.
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
             "bool", "offset", "inf", "nan"}


def series_names(expr: str) -> set[str]:
    """Series names an expression selects: identifiers that are not functions,
    keywords, label names (grouping lists, `{...}`) or strings."""
    lv = re.fullmatch(r"\s*label_values\((.+),\s*\w+\)\s*", expr)
    if lv:
        expr = lv.group(1)
    expr = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)       # strings first: they may hold braces
    expr = re.sub(r"\{[^}]*\}", "", expr)                 # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)                # range/subquery durations
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        follows = expr[match.end():].lstrip()
        if follows.startswith("(") or match.group(0).lower() in _KEYWORDS:
            continue  # a function or aggregation, or a keyword
        names.add(match.group(0))
    return names


@pytest.mark.parametrize("uid", BOARDS)
def test_dashboard_serializes_with_uid_title_and_tags(uid):
    board = json.loads(json.dumps(BOARDS[uid]()))  # plain JSON data, no SDK objects left
    assert board["uid"] == uid
    assert board["title"].startswith("mirrorstack: ")
    assert board["tags"] == ["mirrorstack"]
    ds = [v for v in board["templating"]["list"] if v["name"] == "datasource"]
    assert ds and ds[0]["type"] == "datasource" and ds[0]["query"] == "prometheus"


def test_dashboards_files():
    files = gd.dashboards()
    assert set(files) == {"mirrorstack-overview.json", "mirrorstack-flow.json"}
    uids = {name: json.loads(text)["uid"] for name, text in files.items()}
    assert uids == {"mirrorstack-overview.json": "mirrorstack-overview",
                    "mirrorstack-flow.json": "mirrorstack-flow"}
    assert gd.dashboards() == files  # stable output: no random ids or ordering


@pytest.mark.parametrize("uid", BOARDS)
def test_every_panel_has_title_datasource_and_queries(uid):
    board = BOARDS[uid]()
    panels = data_panels(board)
    assert len(panels) >= 5
    prom = {"type": "prometheus", "uid": "${datasource}"}
    for panel in panels:
        assert panel.get("title"), panel
        assert panel.get("datasource") == prom, panel["title"]
        assert panel.get("targets"), panel["title"]
        for target in panel["targets"]:
            assert target.get("expr", "").strip(), panel["title"]
            assert target.get("datasource") == prom, panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]


@pytest.mark.parametrize("uid", BOARDS)
def test_rows_are_expanded_and_panel_ids_unique(uid):
    board = BOARDS[uid]()
    rows = [p for p in board["panels"] if p["type"] == "row"]
    assert rows and not any(r.get("collapsed") or r.get("panels") for r in rows)
    ids = [p["id"] for p in all_panels(board)]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("uid", BOARDS)
def test_units(uid):
    for panel in data_panels(BOARDS[uid]()):
        unit = panel["fieldConfig"]["defaults"].get("unit")
        title = panel["title"].lower()
        if "latency" in title or "age" in title:
            assert unit == "ms", panel["title"]
        elif "records/s" in title:
            assert unit == "reqps", panel["title"]
        elif "bytes/s" in title:
            assert unit == "Bps", panel["title"]
        elif "heap" in title:
            assert unit == "bytes", panel["title"]


def test_overview_has_one_line_per_flow():
    exprs = gd.dashboard_queries(gd.overview_dashboard())
    mm2 = [e for e in exprs if "kafka_connect_mirror_" in e]
    assert mm2 and all("by (flow)" in e for e in mm2)
    assert f"sum by (flow) (rate({metrics.MM2_RECORDS}[$__rate_interval]))" in exprs


def test_series_names_parser():
    expr = ('sum by (connect, instance) (rate(jvm_x{area="h{1}",role=~"a|b"}[5m])) '
            'and on (connect) group by (connect) (other_y{connector=~"$flow\\\\..*"}) > bool 0')
    assert series_names(expr) == {"jvm_x", "other_y"}
    assert series_names("label_values(some_series, flow)") == {"some_series"}


def test_queries_use_only_contract_series():
    for expr in all_queries():
        names = series_names(expr)
        assert names, expr
        assert names <= KNOWN_SERIES, (expr, names - KNOWN_SERIES)


def test_flow_variable():
    board = gd.flow_dashboard()
    (flow,) = [v for v in board["templating"]["list"] if v["name"] == "flow"]
    assert flow["type"] == "query"
    assert flow["query"] == f"label_values({metrics.MM2_RECORDS}, flow)"
    assert flow["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert flow["multi"] and flow["includeAll"]
    assert "label_values" not in json.dumps(gd.overview_dashboard())  # overview: all flows, no variable


def test_every_flow_panel_query_selects_the_flow():
    by_flow, by_connector = 'flow=~"$flow"', 'connector=~"$flow\\\\..*"'
    for panel in data_panels(gd.flow_dashboard()):
        for target in panel["targets"]:
            expr = target["expr"]
            assert by_flow in expr or by_connector in expr, (panel["title"], expr)
            # A variable is a regex when multi-valued: never compare it with `=`.
            assert not re.search(r'[^=!]="\$', expr), expr


def test_connector_regex_matches_mm2_connector_names():
    from mirrorstack.mm2.connectors import CHECKPOINT, SOURCE, connector_name
    # The regex as Grafana sends it for flow `us->central`, after PromQL string unescaping.
    regex = gd.FLOW_CONNECTORS.split('"')[1].replace("\\\\", "\\").replace("$flow", "us->central")
    assert re.fullmatch(regex, connector_name("us->central", SOURCE))
    assert re.fullmatch(regex, connector_name("us->central", CHECKPOINT))
    assert not re.fullmatch(regex, connector_name("us->centralx", SOURCE))


def test_concrete_query_replaces_variables():
    cq = gd.concrete_query
    assert cq('m{flow=~"$flow"}[$__rate_interval]') == 'm{flow=~".+"}[1m]'
    assert cq('m{flow=~"${flow}"}[$__interval] offset $__range') == 'm{flow=~".+"}[1m] offset 5m'
    assert cq("label_values(m, flow)") == "group by (flow) (m)"
    for expr in all_queries():
        assert "$" not in cq(expr), expr


def test_queries_are_valid_promql(tmp_path):
    run = _promtool_rules(tmp_path, [gd.concrete_query(e) for e in all_queries()])
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("bad", ["sum by (flow) (rate(m[1m])", "rate(m[$__rate_interval])"])
def test_promtool_rejects_bad_promql(tmp_path, bad):
    # Keeps the check above honest: promtool really parses the expressions.
    assert _promtool_rules(tmp_path, [bad]).returncode != 0


def _promtool_rules(tmp_path: Path, exprs: list[str]) -> subprocess.CompletedProcess:
    rules = {"groups": [{"name": "dashboards", "rules": [
        {"record": f"mirrorstack:dashboard_query_{i}", "expr": expr} for i, expr in enumerate(exprs)]}]}
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump(rules))
    # toolchain fails naming `make prometheus` when promtool is missing: never a skip
    return subprocess.run([toolchain.promtool_binary(), "check", "rules", str(path)], capture_output=True, text=True,
                          timeout=60)


def test_module_does_not_import_pulumi():
    code = ("import sys, mirrorstack.monitoring.dashboards; "
            "assert not [m for m in sys.modules if m.split('.')[0] == 'pulumi']")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
