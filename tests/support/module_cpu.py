"""CPU seconds per test module, of every process the module starts (its
JVMs, the Pulumi engine, the programs, keepers, Spark drivers), measured by
the kernel: the process running the module's tests moves into a cpuacct
cgroup of its own when the module's first test starts, every process it
starts afterwards is born there, and the cgroup's usage is attached to each
test's report. The suite is CPU-bound on two cores (wall ≈ CPU / 2), so this
is the figure to cut; wall seconds alone mix a module's own cost with its
neighbour's load.

Containers and pods live in their engines' own groups (docker/, kubepods/ at
the hierarchy's root): what those used while a module of the docker-engine unit
ran is added to it. Only that unit's modules run containers or pods, one at a
time on one worker (tests/support/scheduling.py), so the delta is theirs, and
never a module's that ran beside them on the other worker. (The engines' own
daemons count for the module that started them.) Hosts without
a writable cgroup v1 cpuacct hierarchy (not root, or cgroup v2 only) are not
measured, and the summary says so.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.scheduling import DOCKER_ENGINE, module_of, unit_of

ROOT = Path("/sys/fs/cgroup/cpuacct")
PROPERTY = "module_cpu_seconds"
ENGINE_GROUPS = ("docker", "kubepods")  # where dockerd and the kubelet put containers and pods


def available(root: Path = ROOT) -> bool:
    return (root / "cgroup.procs").is_file() and os.access(root, os.W_OK)


class ModuleCpu:
    """A pytest plugin in the process that runs the tests (an xdist worker, or a plain run)."""

    def __init__(self, root: Path = ROOT, pid: int | None = None):
        self.root, self.pid = root, pid or os.getpid()
        self.base = root / f"mirrorstack-tests-{self.pid}"
        self.module: str | None = None
        self.group: Path | None = None
        self.engines: dict[str, tuple[int, int]] = {}  # group -> (usage when the module began, last seen)
        self.runs_containers = False

    def _enter(self, module: str) -> None:
        self.module = module
        self.group = self.base / module.replace("/", "_")
        self.group.mkdir(parents=True, exist_ok=True)
        (self.group / "cgroup.procs").write_text(str(self.pid))
        self.runs_containers = unit_of(module) == DOCKER_ENGINE
        self.engines = {name: (usage, usage) for name in ENGINE_GROUPS
                        if (usage := _usage(self.root / name)) is not None}

    def _engines_ns(self) -> int:
        """What the engines' containers and pods used since the module began (a
        group made meanwhile counts from 0; one removed keeps its last figure)."""
        for name in ENGINE_GROUPS:
            usage = _usage(self.root / name)
            if usage is not None:
                self.engines[name] = (self.engines.get(name, (0, 0))[0], usage)
        return sum(last - first for first, last in self.engines.values())

    def seconds(self) -> float | None:
        own = _usage(self.group) if self.group else None
        if own is None:
            return None
        return (own + (self._engines_ns() if self.runs_containers else 0)) / 1e9

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


def _usage(group: Path) -> int | None:
    try:
        return int((group / "cpuacct.usage").read_text())
    except (OSError, ValueError):
        return None


def module_seconds(report) -> float | None:
    """The CPU seconds a report carries (the module's so far)."""
    return next((value for name, value in report.user_properties if name == PROPERTY), None)
