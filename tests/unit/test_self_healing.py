"""Self-healing's decisions (mirrorstack.connect.healing), its metrics and alert
(checked by the real promtool), and the supervisor each platform runs per
deployed Connect group. The supervisor against a real Connect group:
tests/integration/test_secure_stack.py (healed, held while paused) and
test_connect_faults.py (the cap and its alert, live)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from mirrorstack import toolchain
from mirrorstack.connect import supervisor
from mirrorstack.connect.healing import (CAP_REACHED, CHECK_ERRORS, FAILED_PARTS, HELD, LAST_CHECK, REMIND_SECONDS,
                                         RESTART_CAP, RESTARTS_IN_A_ROW, RESTARTS_TOTAL, Memory, ReadFailures,
                                         Schedule, Supervision, decide, remember)
from mirrorstack.connect.supervision import SHIPS, supervisor_config
from mirrorstack.model.spec import SelfHealing, TopologyError, load_topology
from mirrorstack.monitoring.alerts import RESTART_CAP_ALERT, alert_rules, alert_rules_file
from tests.support.ports import free_ports
from tests.support.promtool import promtool

ROOT = Path(__file__).resolve().parents[2]
STRIMZI = Schedule(unit_seconds=60, max_delay_seconds=3600, max_restarts=10)


def status(connector: str = "RUNNING", *tasks: str) -> dict:
    return {"connector": {"state": connector, "worker_id": "w:8083"},
            "tasks": [{"id": i, "state": s, "worker_id": "w:8083",
                       **({"trace": "org.apache.kafka.common.errors.TopicAuthorizationException: edge.orders"}
                          if s == "FAILED" else {})} for i, s in enumerate(tasks)]}


def test_the_schedule_is_strimzis_with_a_ceiling():
    assert [STRIMZI.delay(n) / 60 for n in range(10)] == [0, 2, 6, 12, 20, 30, 42, 56, 60, 60]
    assert Schedule(unit_seconds=2, max_delay_seconds=10).delay(3) == 10


def test_a_failed_task_is_restarted_at_once_then_after_a_growing_backoff_then_given_up():
    schedule, memory, now = Schedule(unit_seconds=10, max_delay_seconds=1000, max_restarts=3), Memory(), 1000.0
    failed = status("RUNNING", "RUNNING", "FAILED")
    times = []
    for _ in range(200):  # one check a second
        decision = decide(failed, "running", memory, now, schedule)
        if decision.action == "restart":
            times.append(now - 1000)
            assert "task 1 FAILED on w:8083: org.apache.kafka.common.errors.TopicAuthorizationException" in decision.why
        remember(memory, decision, failed, now, schedule)
        now += 1
    assert times == [0, 20, 80]  # at once, then 2 and 6 units after the one before
    assert memory.capped and memory.total == 3
    assert decide(failed, "running", memory, now, schedule).action == "capped"
    # healthy again (a person's `up`): no longer capped at once, the count starts over after one back-off
    remember(memory, decide(status("RUNNING", "RUNNING"), "running", memory, now, schedule),
             status("RUNNING", "RUNNING"), now, schedule)
    assert not memory.capped and memory.restarts == 3
    later = now + schedule.delay(3)
    remember(memory, decide(status("RUNNING", "RUNNING"), "running", memory, later, schedule),
             status("RUNNING", "RUNNING"), later, schedule)
    assert memory.restarts == 0 and memory.total == 3


def test_a_short_healthy_spell_does_not_start_the_count_over():
    schedule, memory = Schedule(unit_seconds=10, max_restarts=5), Memory()
    for now, state in [(0, "FAILED"), (5, "RUNNING"), (12, "RUNNING"), (13, "FAILED")]:
        s = status("RUNNING", state)
        remember(memory, decide(s, "running", memory, now, schedule), s, now, schedule)
    assert memory.restarts == 1  # up 8 s of the 20 s back-off: still one in a row
    assert decide(status("RUNNING", "FAILED"), "running", memory, 19, schedule).action == "wait"
    assert decide(status("RUNNING", "FAILED"), "running", memory, 20, schedule).action == "restart"


@pytest.mark.parametrize("wanted, connector", [("paused", "PAUSED"), ("stopped", "STOPPED"),
                                                ("running", "PAUSED"), ("running", "STOPPED"),
                                                ("paused", "RUNNING")])
def test_paused_or_stopped_flows_and_connectors_are_never_restarted(wanted, connector):
    memory = Memory()
    decision = decide(status(connector, "FAILED"), wanted, memory, 0, STRIMZI)
    assert decision.action == "held", decision
    remember(memory, decision, status(connector, "FAILED"), 0, STRIMZI)
    assert memory.held and memory.restarts == 0


def test_a_failed_connector_itself_is_restarted_and_a_missing_one_is_not():
    assert decide(status("FAILED"), "running", Memory(), 0, STRIMZI).action == "restart"
    assert decide(None, "running", Memory(), 0, STRIMZI).action == "absent"
    assert decide(status("RUNNING", "RUNNING", "UNASSIGNED"), "running", Memory(), 0, STRIMZI).action == "healthy"


def _families(text: str, parse=text_string_to_metric_families) -> dict:
    return {family.name: family for family in parse(text)}


def test_metrics_show_every_connector_even_when_all_is_well():
    supervision = Supervision("central", {"a->b.MirrorSourceConnector": "running", "a->b.Mirror\"X": "paused"},
                              STRIMZI)
    supervision.of("a->b.MirrorSourceConnector").capped = True
    supervision.last_check = 1764326400.25
    text = generate_latest(supervisor.registry(supervision)).decode()
    families = _families(text)
    # the names the dashboards, alerts and tests use, each of its type, with its HELP
    assert {name: family.type for name, family in families.items()} == {
        "mirrorstack_connector_restarts": "counter", RESTARTS_IN_A_ROW: "gauge", RESTART_CAP: "gauge",
        CAP_REACHED: "gauge", FAILED_PARTS: "gauge", HELD: "gauge", LAST_CHECK: "gauge",
        "mirrorstack_supervisor_check_errors": "counter"}
    assert f"# TYPE {RESTARTS_TOTAL} counter" in text and f"# TYPE {CHECK_ERRORS} counter" in text
    assert families[CAP_REACHED].documentation == "1 while the supervisor has given up on the connector (its cap reached)."
    samples = {(s.name, s.labels.get("connector")): (s.labels, s.value) for f in families.values() for s in f.samples}
    assert len(samples) == 6 * 2 + 2  # one series per connector and metric, no `_created` series
    assert samples[(CAP_REACHED, "a->b.MirrorSourceConnector")][1] == 1
    assert samples[(CAP_REACHED, "a->b.Mirror\"X")] == ({"connect": "central", "connector": "a->b.Mirror\"X"}, 0)
    assert samples[(RESTART_CAP, "a->b.MirrorSourceConnector")][1] == 10
    assert samples[(LAST_CHECK, None)] == ({"connect": "central"}, 1764326400.25)
    assert samples[(RESTARTS_TOTAL, "a->b.MirrorSourceConnector")][1] == 0
    linted = subprocess.run([toolchain.promtool_binary(), "check", "metrics"], input=text, capture_output=True,
                            text=True, timeout=60)
    assert (linted.returncode, linted.stdout + linted.stderr) == (0, ""), linted  # Prometheus's own linter


def test_the_alerts_and_dashboards_name_the_series_the_supervisor_exports():
    # monitoring writes the names without importing connect/ (what the supervisor imports ships with it)
    from mirrorstack.monitoring import metrics
    assert (metrics.CONNECTOR_RESTARTS, metrics.RESTART_CAP_REACHED) == (RESTARTS_TOTAL, CAP_REACHED)


def test_the_supervisor_serves_its_metrics_in_the_format_the_scraper_asks_for_and_its_health():
    """Prometheus asks for OpenMetrics first; curl and the tests take the text format."""
    import requests
    supervision = Supervision("central", {"a->b.MirrorSourceConnector": "running"}, STRIMZI)
    (port,) = free_ports(1)
    server = supervisor.serve(supervision, "127.0.0.1", port)
    url = f"http://127.0.0.1:{port}"
    try:
        health = requests.get(f"{url}/healthz", timeout=5)
        assert (health.status_code, health.text) == (503, "checks 0, errors 0\n")  # no check yet
        plain = requests.get(f"{url}/metrics", timeout=5)
        assert plain.status_code == 200 and plain.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert _families(plain.text)[FAILED_PARTS].samples[0].labels["connector"] == "a->b.MirrorSourceConnector"
        open_metrics = requests.get(f"{url}/metrics", timeout=5, headers={
            "Accept": "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.2"})
        assert open_metrics.headers["Content-Type"].startswith("application/openmetrics-text")
        families = _families(open_metrics.text, openmetrics_families)
        assert families["mirrorstack_connector_restarts"].samples[0].name == RESTARTS_TOTAL
        assert requests.get(f"{url}/elsewhere", timeout=5).status_code == 404
        supervision.checks = 1
        assert requests.get(f"{url}/healthz", timeout=5).status_code == 200
    finally:
        server.shutdown()
        server.server_close()


def test_a_long_outage_is_said_when_it_begins_at_a_bounded_rate_while_it_lasts_and_when_it_ends():
    failures, said = ReadFailures(), []
    for second in range(3600):  # an hour of failed checks, one a second
        said.append(failures.failed(float(second), "ConnectionRefusedError"))
    lines = [line for line in said if line]
    assert REMIND_SECONDS == 600 and len(lines) == 6, lines  # at 0 s, then every 10 min
    assert lines[0].startswith("cannot read the connectors' status (ConnectionRefusedError)"), lines[0]
    assert lines[1] == "still cannot read the connectors' status, for 600 s (601 checks): ConnectionRefusedError"
    assert failures.answered(3600.0) == "reads the connectors' status again, after 3600 failed checks in 3600 s"
    assert failures.answered(3601.0) is None and failures.failed(3602.0, "again").startswith("cannot read")


def test_the_supervisor_says_once_that_it_cannot_read_connect_not_at_every_check(tmp_path):
    """The real supervisor against a Connect URL where nothing listens, checking every 50 ms: one line, however
    many checks fail (it said so at every check: one line per `check_seconds`)."""
    metrics_port, dead_port = free_ports(2)
    config = {**supervisor_config("central", [f"http://127.0.0.1:{dead_port}"], {"a->b.MirrorSourceConnector": "running"},
                                  SelfHealing()),
              "check_seconds": 0.05, "listen": f"127.0.0.1:{metrics_port}", "secrets_file": None}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with open(tmp_path / "supervisor.log", "w") as log:
        process = subprocess.Popen([sys.executable, "-m", "mirrorstack.connect.supervisor", str(tmp_path / "config.json")],
                                   stdout=log, stderr=subprocess.STDOUT)
    try:
        import requests
        deadline, errors = time.monotonic() + 30, 0
        while errors < 20:
            assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "supervisor.log").read_text()
            try:
                errors = int(requests.get(f"http://127.0.0.1:{metrics_port}/healthz", timeout=2).text.split()[3])
            except requests.ConnectionError:  # not serving yet
                pass
            time.sleep(0.05)
    finally:
        process.terminate()
        process.wait(timeout=10)
    said = (tmp_path / "supervisor.log").read_text()
    assert said.count("cannot read the connectors' status") == 1, f"{errors} failed checks:\n{said[-2000:]}"


def test_the_cap_alert_fires_once_the_supervisor_gives_up_and_resolves_after(tmp_path):
    """promtool's rule test: the alert stays quiet while restarts go on, fires the
    evaluation after the cap is reached, and resolves once the connector runs."""
    (tmp_path / "alerts.yml").write_text(alert_rules_file(alert_rules([])))
    connector = 'connect="central",connector="edge->central.MirrorSourceConnector",cluster="central"'
    (tmp_path / "test.yml").write_text(yaml.safe_dump({
        "rule_files": ["alerts.yml"], "evaluation_interval": "15s",
        "tests": [{"interval": "15s",
                   "input_series": [{"series": f"{CAP_REACHED}{{{connector},job=\"supervisor-central\"}}",
                                     "values": "0 0 0 1 1 1 0 0"},
                                    {"series": f'up{{role="supervisor",connect="central",instance="s:9405"}}',
                                     "values": "1 1 1 1 1 1 1 1"}],
                   "alert_rule_test": [
                       {"eval_time": "30s", "alertname": RESTART_CAP_ALERT, "exp_alerts": []},
                       {"eval_time": "45s", "alertname": RESTART_CAP_ALERT, "exp_alerts": [{
                           "exp_labels": {"severity": "critical", "connect": "central", "cluster": "central",
                                          "connector": "edge->central.MirrorSourceConnector"},
                           "exp_annotations": {"summary": (
                               "The supervisor of central gave up restarting edge->central.MirrorSourceConnector "
                               "(its restart cap): find the cause in the worker log, fix it, then pulumi up (or "
                               "POST .../restart?includeTasks=true&onlyFailed=true)")}}]},
                       {"eval_time": "90s", "alertname": RESTART_CAP_ALERT, "exp_alerts": []},
                       {"eval_time": "90s", "alertname": "ConnectSupervisorDown", "exp_alerts": []}]}]}))
    checked = promtool("test", "rules", str(tmp_path / "test.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_supervisors_config_has_the_schedule_and_each_connectors_wanted_state():
    config = supervisor_config("central", ["http://127.0.0.1:1"], {"b": "paused", "a": "running"},
                               SelfHealing(backoff_seconds=5, max_restarts=3))
    assert config["connectors"] == {"a": "running", "b": "paused"} and list(config["connectors"]) == ["a", "b"]
    assert config["schedule"] == {"unit_seconds": 5.0, "max_delay_seconds": 3600.0, "max_restarts": 3}
    assert config["check_seconds"] == 15 and "password" not in json.dumps(config)
    assert "mirrorstack.connect.api" in SHIPS and not any("model" in m or "pulumi" in m for m in SHIPS)


def test_self_healing_settings_are_checked_with_the_field_named():
    topology = yaml.safe_load((ROOT / "stacks" / "Pulumi.aggregation.yaml").read_text())["config"]["mirrorstack:topology"]
    topology["connect"] = {"hub": {"kafka": "central", "self_healing": {"max_restarts": 0}}}
    for flow in topology["flows"]:
        flow["connect"] = "hub"
    with pytest.raises(TopologyError, match=r"connect\.hub\.self_healing\.max_restarts"):
        load_topology(topology)
    topology["connect"]["hub"]["self_healing"] = {"enabled": False}
    assert load_topology(topology).connect["hub"].self_healing.enabled is False
