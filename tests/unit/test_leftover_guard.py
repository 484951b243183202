"""The suite-wide guard fails a run that leaves a process behind."""
import os
from pathlib import Path

from tests.support.leftovers import leftover_processes

ROOT = Path(__file__).resolve().parents[2]

LEAKY_TEST = """
import sys
from mirrorstack.platforms.local import launcher

def test_leaks(tmp_path):
    launcher.start("leaky", [sys.executable, "-c", "import time; time.sleep(120)", str(tmp_path)],
                   log_file=tmp_path / "leaky.log")

def test_tidy(tmp_path):
    h = launcher.start("tidy", [sys.executable, "-c", "import time; time.sleep(120)", str(tmp_path)],
                       log_file=tmp_path / "tidy.log")
    launcher.stop(h)
"""


def _run(pytester, monkeypatch, body):
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    pytester.makeconftest("from tests.conftest import pytest_sessionfinish")
    pytester.makepyfile(test_inner=body)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider")


def test_a_leaked_process_fails_the_run_and_is_named(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, LEAKY_TEST)
    assert result.ret == 1  # both tests passed, the run still fails
    result.stdout.fnmatch_lines(["*Processes started by the test suite were still running (killed)*",
                                 "*time.sleep(120)*test_leaks0*", "*2 passed*"])
    # ...and the guard killed the survivor rather than leaving it to us.
    assert leftover_processes(str(pytester.path)) == []


def test_a_tidy_run_passes(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, LEAKY_TEST.replace("def test_leaks", "def _not_run"))
    assert result.ret == 0
    result.stdout.no_fnmatch_line("*still running*")


def test_the_runs_own_ancestors_are_not_leftovers(tmp_path):
    # e.g. `flock LOCK pytest --basetemp=DIR`: the wrapper's command line holds the marker too.
    import subprocess
    import sys
    marker = str(tmp_path / "marker-dir")
    probe = "from tests.support.leftovers import leftover_processes as f; import sys; print(f(sys.argv[1]))"
    done = subprocess.run(["sh", "-c", f'"{sys.executable}" -c "$0" "$1"; true', probe, marker],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_another_runs_temp_dir_with_the_same_prefix_is_not_this_runs(tmp_path):
    import subprocess
    import sys
    marker = str(tmp_path / "pt-a")
    sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker + "2/x"])
    mine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker + "/x"])
    try:
        assert [p.pid for p in leftover_processes(marker)] == [mine.pid]
    finally:
        for p in (sibling, mine):
            p.kill()
            p.wait()


class _DestroyThatFails:
    """A stack whose `pulumi destroy` stops nothing (as when it fails half way)."""

    def __init__(self, local_dir: Path):
        self.local_dir, self.commands = local_dir, []

    def run(self, *args, **kwargs):
        self.commands.append(args)


def test_what_a_failed_destroy_leaves_is_killed_so_the_port_range_is_free_again(tmp_path):
    import subprocess
    import sys

    import pytest

    from tests.support.stacks import _tear_down
    for test_passed in (False, True):
        project = _DestroyThatFails(tmp_path / f"local-{test_passed}")
        service = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"{project.local_dir}/x"])
        try:
            if test_passed:  # the test's own result stands otherwise: the kill is reported only here
                with pytest.raises(AssertionError, match=f"pid {service.pid}: .*time.sleep"):
                    _tear_down(project, test_passed=True)
            else:
                _tear_down(project)
            assert project.commands == [("destroy", "--yes", "--skip-preview")]
            assert service.wait(timeout=10) == -9
        finally:
            service.kill()
