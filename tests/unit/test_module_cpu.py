"""Each module's CPU seconds, from the kernel (tests/support/module_cpu.py)."""
from __future__ import annotations

import re
from pathlib import Path

from tests.support import module_cpu
from tests.support.module_cpu import ModuleCpu, module_seconds

REPO = Path(__file__).resolve().parents[2]
KUBE = "tests/integration/test_kubernetes_platform.py"  # a module of the docker-engine unit


class Report:
    def __init__(self, nodeid: str):
        self.nodeid, self.user_properties = nodeid, []


def test_each_module_gets_its_own_group_and_its_reports_carry_the_groups_usage(tmp_path):
    (tmp_path / "cgroup.procs").write_text("")
    plugin = ModuleCpu(root=tmp_path, pid=4242)
    plugin.pytest_runtest_logstart("tests/a/test_x.py::test_one", None)
    group = tmp_path / "mirrorstack-tests-4242" / "tests_a_test_x.py"
    assert (group / "cgroup.procs").read_text() == "4242"  # the process moved there
    (group / "cpuacct.usage").write_text("2500000000\n")
    report = Report("tests/a/test_x.py::test_one")
    plugin.pytest_runtest_logreport(report)
    assert module_seconds(report) == 2.5

    plugin.pytest_runtest_logstart("tests/a/test_y.py::test_two", None)
    assert (tmp_path / "mirrorstack-tests-4242" / "tests_a_test_y.py" / "cgroup.procs").read_text() == "4242"
    unmeasured = Report("tests/a/test_y.py::test_two")  # its group has no usage file: nothing attached
    plugin.pytest_runtest_logreport(unmeasured)
    assert module_seconds(unmeasured) is None


def test_containers_and_pods_used_meanwhile_count_for_the_engines_unit(tmp_path):
    """docker/ existed before the module and grew by 3 s; kubepods/ appeared with 4 s, then went
    (the cluster stopped): 7 s added to the module's own 1 s."""
    (tmp_path / "cgroup.procs").write_text("")
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "cpuacct.usage").write_text("10000000000")
    plugin = ModuleCpu(root=tmp_path, pid=7)
    plugin.pytest_runtest_logstart(f"{KUBE}::test_one", None)
    (tmp_path / "mirrorstack-tests-7" / KUBE.replace("/", "_") / "cpuacct.usage").write_text("1000000000")
    (tmp_path / "docker" / "cpuacct.usage").write_text("13000000000")
    (tmp_path / "kubepods").mkdir()
    (tmp_path / "kubepods" / "cpuacct.usage").write_text("4000000000")
    assert plugin.seconds() == 8.0
    (tmp_path / "kubepods" / "cpuacct.usage").unlink()
    assert plugin.seconds() == 8.0


def test_a_module_beside_the_engines_unit_gets_none_of_their_containers(tmp_path):
    """The other worker's module ran while the kube module's pods worked: only its own counts."""
    (tmp_path / "cgroup.procs").write_text("")
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "cpuacct.usage").write_text("10000000000")
    plugin = ModuleCpu(root=tmp_path, pid=8)
    plugin.pytest_runtest_logstart("tests/integration/test_secure_stack.py::test_one", None)
    group = tmp_path / "mirrorstack-tests-8" / "tests_integration_test_secure_stack.py"
    (group / "cpuacct.usage").write_text("2000000000")
    (tmp_path / "docker" / "cpuacct.usage").write_text("90000000000")
    assert plugin.seconds() == 2.0


def test_a_host_without_the_hierarchy_is_not_measured(tmp_path):
    assert not module_cpu.available(tmp_path / "missing")
    assert module_cpu.available(tmp_path) is False  # no cgroup.procs: not a cgroup


def test_a_child_process_cpu_is_counted_for_its_module(pytester, monkeypatch):
    """A real cgroup (the suite runs as root on a cgroup v1 host): a module whose test starts a
    process that burns CPU reports it."""
    assert module_cpu.available(), f"{module_cpu.ROOT} is not a writable cpuacct hierarchy"
    pytester.makeconftest("""
from tests.support.module_cpu import ModuleCpu
def pytest_configure(config):
    config.pluginmanager.register(ModuleCpu(), "module-cpu")
def pytest_runtest_logreport(report):
    if report.when == "call":
        print("CPU", dict(report.user_properties).get("module_cpu_seconds"))
""")
    pytester.makepyfile(test_burn="""
import subprocess, sys
def test_burn():
    subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + 0.5\\nwhile time.process_time() < end: pass"], check=True)
""")
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # its conftest imports tests.support
    result = pytester.runpytest_subprocess("-s", "-p", "no:randomly")
    assert result.ret == 0, result.errlines[-20:]
    (seconds,) = re.findall(r"CPU ([0-9.]+)", result.stdout.str())
    assert float(seconds) >= 0.45, result.outlines
