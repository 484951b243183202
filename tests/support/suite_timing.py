"""Seconds per test module (setup + call + teardown of its tests), summed in
the process that reports (the xdist controller too): printed at the end of a
run as the slowest modules, and written to suite_weights.json on request
(`MIRRORSTACK_RECORD_WEIGHTS=1`), which is what the scheduler orders by."""
from __future__ import annotations

import json
import os
from collections import defaultdict

from tests.support.scheduling import WEIGHTS_FILE, module_of

SHOWN = 10


class ModuleTimes:
    """A pytest plugin, registered by tests/conftest.py outside xdist workers."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report) -> None:
        self.seconds[module_of(report.nodeid)] += report.duration

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.seconds:
            return
        terminalreporter.section(f"slowest {SHOWN} modules (setup + call + teardown)")
        for module, seconds in self.slowest():
            terminalreporter.write_line(f"{seconds:8.1f}s  {module}")
        if os.environ.get("MIRRORSTACK_RECORD_WEIGHTS"):
            self.write_weights()
            terminalreporter.write_line(f"written: {WEIGHTS_FILE}")

    def slowest(self, count: int = SHOWN) -> list[tuple[str, float]]:
        return sorted(self.seconds.items(), key=lambda item: -item[1])[:count]

    def write_weights(self) -> None:
        """Merge this run's figures into the weights (a narrowed run keeps the others)."""
        weights = json.loads(WEIGHTS_FILE.read_text()) if WEIGHTS_FILE.exists() else {}
        weights.update({module: round(seconds, 1) for module, seconds in self.seconds.items()})
        WEIGHTS_FILE.write_text(json.dumps(dict(sorted(weights.items())), indent=1) + "\n")
