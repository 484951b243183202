"""The suite's own summary: where each worker ended (tests/support/suite_timing.py)."""
from __future__ import annotations

from types import SimpleNamespace

from tests.support.suite_timing import ModuleTimes


def _report(nodeid: str, worker: str, start: float, stop: float):
    return SimpleNamespace(nodeid=nodeid, duration=stop - start, start=start, stop=stop, user_properties=[],
                           node=SimpleNamespace(gateway=SimpleNamespace(id=worker)))


def test_each_worker_says_when_it_ended_and_its_last_modules():
    times = ModuleTimes()
    for report in (_report("tests/a.py::t1", "gw0", 1000, 1100), _report("tests/a.py::t2", "gw0", 1100, 1130),
                   _report("tests/b.py::t", "gw1", 1000, 1500), _report("tests/c.py::t", "gw0", 1130, 1200)):
        times.pytest_runtest_logreport(report)
    assert times.worker_ends(last=2) == [
        "gw0 ended at 3:20; last: a.py 0:00-2:10, c.py 2:10-3:20",
        "gw1 ended at 8:20; last: b.py 0:00-8:20"]
    assert times.seconds["tests/a.py"] == 130


def test_one_process_has_no_worker_lines():
    times = ModuleTimes()
    times.pytest_runtest_logreport(SimpleNamespace(nodeid="tests/a.py::t", duration=1, start=0, stop=1,
                                                   user_properties=[]))
    assert times.worker_ends() == []


def test_modules_are_listed_by_cpu_most_first_leaving_out_the_small():
    times = ModuleTimes()
    times.cpu.update({"tests/a.py": 12.0, "tests/b.py": 300.5, "tests/c.py": 3.0})
    assert times.by_cpu() == [("tests/b.py", 300.5), ("tests/a.py", 12.0)]


def test_each_test_is_given_the_rise_of_its_modules_cpu_over_its_phases():
    times = ModuleTimes()
    def report(nodeid, when, cpu):
        times.pytest_runtest_logreport(SimpleNamespace(
            nodeid=nodeid, when=when, duration=1, start=0, stop=1,
            user_properties=[("module_cpu_seconds", cpu)]))
    report("tests/a.py::first", "setup", 40.0)  # the module's stack came up in the first test's setup
    report("tests/a.py::first", "call", 52.0)
    report("tests/a.py::second", "call", 70.0)
    report("tests/b.py::only", "call", 15.0)
    report("tests/a.py::third", "call", 71.0)
    assert times.tests_by_cpu() == [("tests/a.py::first", 52.0), ("tests/a.py::second", 18.0),
                                    ("tests/b.py::only", 15.0)]
    assert times.cpu == {"tests/a.py": 71.0, "tests/b.py": 15.0}
