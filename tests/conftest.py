"""Suite-wide guard: no process started by the suite may outlive it."""
import os
import signal

import pytest

from tests.support.leftovers import leftover_processes

pytest_plugins = ["pytester"]


def pytest_sessionfinish(session, exitstatus):
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    marker = str(factory.getbasetemp())
    survivors = leftover_processes(marker, parent=os.getpid())
    if not survivors:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    reporter.write_line("\nProcesses started by the test suite are still running:", red=True)
    for proc in survivors:
        reporter.write_line(f"  pid {proc.pid} (ppid {proc.ppid}): {proc.args}", red=True)
        for kill in (os.killpg, os.kill):  # group leader or not
            try:
                kill(proc.pid, signal.SIGKILL)
                break
            except (ProcessLookupError, PermissionError):
                continue
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
