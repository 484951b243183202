"""Seconds per test module (setup + call + teardown of its tests), summed in
the process that reports (the xdist controller too): printed at the end of a
run as the slowest modules, and written to suite_weights.json on request
(`MIRRORSTACK_RECORD_WEIGHTS=1`), which is what the scheduler orders by.
Beside them, each module's CPU seconds where the host lets tests/support/module_cpu.py
measure them."""
from __future__ import annotations

import json
import os
from collections import defaultdict

from tests.support.module_cpu import module_seconds
from tests.support.scheduling import WEIGHTS_FILE, module_of

SHOWN = 10


class ModuleTimes:
    """A pytest plugin, registered by tests/conftest.py outside xdist workers."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = {}
        self.spans: dict[str, list] = {}  # module -> [worker, first start, last stop] (epoch seconds)
        self.test_cpu: dict[str, float] = defaultdict(float)  # nodeid -> its phases' share of its module's CPU

    def pytest_runtest_logreport(self, report) -> None:
        module = module_of(report.nodeid)
        self.seconds[module] += report.duration
        worker = getattr(getattr(report, "node", None), "gateway", None)
        span = self.spans.setdefault(module, [getattr(worker, "id", "-"), report.start, report.stop])
        span[1], span[2] = min(span[1], report.start), max(span[2], report.stop)
        cpu = module_seconds(report)
        if cpu is not None:
            # a report carries its module's CPU so far: the rise since the module's previous report
            # is this phase's, the module's stack held open meanwhile included
            self.test_cpu[report.nodeid] += max(0.0, cpu - self.cpu.get(module, 0.0))
            self.cpu[module] = max(cpu, self.cpu.get(module, 0.0))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.seconds:
            return
        terminalreporter.section(f"slowest {SHOWN} modules (setup + call + teardown; CPU of what each started)")
        for module, seconds in self.slowest():
            cpu = f"{self.cpu[module]:8.1f} CPU s" if module in self.cpu else "     (CPU not measured)"
            terminalreporter.write_line(f"{seconds:8.1f}s {cpu}  {module}")
        if self.cpu:
            terminalreporter.write_line(f"all modules: {sum(self.seconds.values()):.0f} s, "
                                        f"{sum(self.cpu.values()):.0f} CPU s")
            # on 2 cores the suite is bound by CPU: where every CPU second of it went
            terminalreporter.write_line("by CPU: " + ", ".join(
                f"{module.rsplit('/', 1)[-1]} {cpu:.0f}" for module, cpu in self.by_cpu()))
            terminalreporter.write_line("tests by CPU (setup + call + teardown): " + ", ".join(
                f"{nodeid.rsplit('/', 1)[-1]} {cpu:.0f}" for nodeid, cpu in self.tests_by_cpu()))
        for line in self.worker_ends():
            terminalreporter.write_line(line)
        if os.environ.get("MIRRORSTACK_RECORD_WEIGHTS"):
            self.write_weights()
            terminalreporter.write_line(f"written: {WEIGHTS_FILE}")

    def worker_ends(self, last: int = 3) -> list[str]:
        """Each worker's end and its last modules, minutes from the run's start: a
        worker that ends long before the other is the schedule's tail."""
        if len({worker for worker, _, _ in self.spans.values()}) < 2:
            return []
        begun = min(start for _, start, _ in self.spans.values())
        lines = []
        for worker in sorted({worker for worker, _, _ in self.spans.values()}):
            mine = sorted((stop, start, module) for module, (w, start, stop) in self.spans.items() if w == worker)
            shown = ", ".join(f"{module.rsplit('/', 1)[-1]} {_minutes(start - begun)}-{_minutes(stop - begun)}"
                              for stop, start, module in mine[-last:])
            lines.append(f"{worker} ended at {_minutes(mine[-1][0] - begun)}; last: {shown}")
        return lines

    def slowest(self, count: int = SHOWN) -> list[tuple[str, float]]:
        return sorted(self.seconds.items(), key=lambda item: -item[1])[:count]

    def by_cpu(self, at_least: float = 10.0) -> list[tuple[str, float]]:
        """Modules that used `at_least` CPU seconds, most first."""
        return _most_first(self.cpu, at_least)

    def tests_by_cpu(self, count: int = 20, at_least: float = 10.0) -> list[tuple[str, float]]:
        """The `count` tests that used the most CPU, each at least `at_least` seconds."""
        return _most_first(self.test_cpu, at_least)[:count]

    def write_weights(self) -> None:
        """Merge this run's figures into the weights (a narrowed run keeps the others)."""
        weights = json.loads(WEIGHTS_FILE.read_text()) if WEIGHTS_FILE.exists() else {}
        weights.update({module: round(seconds, 1) for module, seconds in self.seconds.items()})
        WEIGHTS_FILE.write_text(json.dumps(dict(sorted(weights.items())), indent=1) + "\n")


def _most_first(cpu: dict[str, float], at_least: float) -> list[tuple[str, float]]:
    return sorted(((name, c) for name, c in cpu.items() if c >= at_least), key=lambda item: -item[1])


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"
