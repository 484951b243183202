"""Suite-wide guards: the code under test is this checkout's; no process
started by the suite may outlive it."""
import os
from pathlib import Path

import pytest

import mirrorstack

# mirrorstack is this checkout installed editable (`make venv`); a venv made for
# another checkout would test that one's code, and the stacks would run it.
_CHECKOUT = Path(__file__).resolve().parents[1]
if Path(mirrorstack.__file__).resolve().parent != _CHECKOUT / "components":
    raise pytest.UsageError(f"mirrorstack is imported from {Path(mirrorstack.__file__).parent}, not from this "
                            f"checkout ({_CHECKOUT}/components): run `make venv` here")

from mirrorstack.spark.spark_io import C1_ONLY
from tests.support import ast_retry
from tests.support.leftovers import kill_leftovers
from tests.support import module_cpu
from tests.support.suite_timing import ModuleTimes

# The suite is CPU-bound on 2 cores, and its JVMs (brokers, workers, Kafka's tools, the Spark
# driver) live minutes and carry a few hundred records: C2's compilations cost more CPU than they
# save (test_existing_connect alone: 227 -> 148 CPU s). Every java the suite starts on this host
# reads JDK_JAVA_OPTIONS (workers inherit it); options on a command line, and any the caller set
# here, come later and win. Containers and pods keep their images' settings.
if C1_ONLY not in os.environ.get("JDK_JAVA_OPTIONS", ""):
    os.environ["JDK_JAVA_OPTIONS"] = f"{C1_ONLY} {os.environ.get('JDK_JAVA_OPTIONS', '')}".strip()

ast_retry.install()  # a failure report must not crash its worker (CPython 3.11.7)

pytest_plugins = ["pytester"]


def pytest_sessionfinish(session, exitstatus):
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None or hasattr(session.config, "workerinput"):  # an xdist worker: the controller checks
        return
    marker = str(factory.getbasetemp())
    survivors = kill_leftovers(marker, parent=os.getpid())
    if not survivors:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    reporter.write_line("\nProcesses started by the test suite were still running (killed):", red=True)
    for proc in survivors:
        reporter.write_line(f"  pid {proc.pid} (ppid {proc.ppid}): {proc.args}", red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_xdist_make_scheduler(config, log):
    """Under `-n`: modules (or groups of them) as units, longest first (tests/support/scheduling.py)."""
    from tests.support.scheduling import ModuleScheduling
    return ModuleScheduling(config, log)


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller (or a plain run) sums every module's time
        config.pluginmanager.register(ModuleTimes(), "module-times")
    if hasattr(config, "workerinput"):
        from tests.support.scheduling import LANE_NICE, is_waiting_lane
        if is_waiting_lane(config.workerinput["workerid"], config.workerinput["workercount"]):
            os.nice(LANE_NICE)  # what it starts (services, JVMs, the engine) inherits it
    runs_tests = hasattr(config, "workerinput") or not config.getoption("numprocesses", None)
    if runs_tests and module_cpu.available():
        config.pluginmanager.register(module_cpu.ModuleCpu(), "module-cpu")
