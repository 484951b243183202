"""The replication benchmark's code, run tiny (`--quick`): every scenario, through
the emulated link, with real brokers and workers (one site for all three: the
clusters, the link and the workers beside each cluster are started once); and
the preview benchmark, one round. Smoke tests: their figures are meaningless at
this size and nothing here times anything."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_quick_benchmark_runs_every_scenario_and_reports_every_figure(tmp_path):
    out = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.replication", "--quick",
                           "--configurations", "mirrorstack,seed", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["quick"] is True and report["machine"]["cpus"] >= 1
    assert list(report["scenarios"]) == ["lan", "wan-pull", "wan-push"]
    for name, scenario in report["scenarios"].items():
        assert scenario["baseline_producer_perf_records_per_second"] > 0
        assert set(scenario["configurations"]) == {"mirrorstack", "seed"}
        for config, figures in scenario["configurations"].items():
            where = f"{name}/{config}"
            # records were counted on the target cluster: across the link in both WAN scenarios
            assert figures["records_per_second_median"] > 0, where
            assert all(run["records"] > 0 for run in figures["rounds"]), where
            assert figures["cpu_seconds_per_million_median"] > 0, where
            assert figures["source_tasks"] == 2, where
            assert 0 < figures["samples"] and 0 <= figures["latency_ms_p50"] <= figures["latency_ms_p99"], where
        assert scenario["ratio_mirrorstack_to_seed"] > 0
    # Across the emulated 40 ms link a record cannot arrive sooner than half a round trip.
    for name in ("wan-pull", "wan-push"):
        assert report["scenarios"][name]["configurations"]["mirrorstack"]["latency_ms_p50"] >= report["rtt_ms"] / 2
    table = report["table"].splitlines()
    assert len(table) == 2 + 3 * 3  # header, rule, per scenario: baseline + 2 configurations


def test_the_preview_benchmark_times_a_new_stack_and_the_engine_baseline(tmp_path):
    out = tmp_path / "preview.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.preview", "--rounds", "1", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["stack"] == "fan-out" and report["rounds"] == 1
    assert report["new_stack_preview"]["median"] > 0 and report["engine_baseline_preview"]["median"] > 0
    assert report["previews_that_asked_what_does_not_exist_yet"] == 0
