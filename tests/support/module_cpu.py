"""CPU seconds per test module, of every process the module starts (its
JVMs, the Pulumi engine, the programs, keepers, Spark drivers), measured by
the kernel: the process running the module's tests moves into a cpuacct
cgroup of its own when the module's first test starts, every process it
starts afterwards is born there, and the cgroup's usage is attached to each
test's report. The suite is CPU-bound on two cores (wall ≈ CPU / 2), so this
is the figure to cut; wall seconds alone mix a module's own cost with its
neighbour's load.

What it cannot see: containers and pods (their engines put them in their own
cgroups), and hosts without a writable cgroup v1 cpuacct hierarchy (not root,
or cgroup v2 only), where it stays off and the summary says so.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.scheduling import module_of

ROOT = Path("/sys/fs/cgroup/cpuacct")
PROPERTY = "module_cpu_seconds"


def available(root: Path = ROOT) -> bool:
    return (root / "cgroup.procs").is_file() and os.access(root, os.W_OK)


class ModuleCpu:
    """A pytest plugin in the process that runs the tests (an xdist worker, or a plain run)."""

    def __init__(self, root: Path = ROOT, pid: int | None = None):
        self.root, self.pid = root, pid or os.getpid()
        self.base = root / f"mirrorstack-tests-{self.pid}"
        self.module: str | None = None
        self.group: Path | None = None

    def _enter(self, module: str) -> None:
        self.module = module
        self.group = self.base / module.replace("/", "_")
        self.group.mkdir(parents=True, exist_ok=True)
        (self.group / "cgroup.procs").write_text(str(self.pid))

    def seconds(self) -> float | None:
        try:
            return int((self.group / "cpuacct.usage").read_text()) / 1e9 if self.group else None
        except (OSError, ValueError):
            return None

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        module = module_of(nodeid)
        if module != self.module:
            try:
                self._enter(module)
            except OSError:
                self.module, self.group = module, None

    @pytest.hookimpl(tryfirst=True)  # before an xdist worker sends the report
    def pytest_runtest_logreport(self, report) -> None:
        seconds = self.seconds()
        if seconds is not None:
            report.user_properties.append((PROPERTY, round(seconds, 1)))

    def pytest_sessionfinish(self) -> None:
        """Back to the root group; the module groups go once nothing runs in them."""
        try:
            (self.root / "cgroup.procs").write_text(str(self.pid))
        except OSError:
            return
        for group in sorted(self.base.glob("*")) + [self.base]:
            try:
                group.rmdir()
            except OSError:  # a process still runs there (leftovers are the suite guard's to name)
                pass


def module_seconds(report) -> float | None:
    """The CPU seconds a report carries (the module's so far)."""
    return next((value for name, value in report.user_properties if name == PROPERTY), None)
