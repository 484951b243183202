"""The local platform's restart policy (mirrorstack.platforms.local.keeper) and
what `pulumi refresh` says of a dead local service, through the LocalService
provider against real OS processes (small Python programs). The supervisor of
a real stack, killed and started again by its keeper:
tests/integration/test_connect_faults.py."""
import os
import re
import signal
import sys
import time

import pytest

from mirrorstack.platforms.local import keeper, launcher, liveness
from mirrorstack.platforms.local.launcher import ServiceFailed
from mirrorstack.platforms.local.service import LocalServiceProvider
from tests.support.leftovers import leftover_processes
from tests.support.ports import free_ports


def _props(tmp_path, argv, restart=keeper.POLICY, health=None) -> dict:
    (port,) = free_ports(1)
    return {"name": "svc", "workdir": str(tmp_path / "svc"), "files": {}, "prepare": [], "timeout_seconds": "20",
            "argv": [a.replace("PORT", str(port)) for a in argv], "restart": restart,
            "health": health or {"kind": "tcp", "host": "127.0.0.1", "port": str(port)}}


SERVER = [sys.executable, "-m", "http.server", "PORT", "--bind", "127.0.0.1"]


# Generous: the suite runs these beside integration modules on 2 loaded cores (a 20 s wait ran out there).
def _wait(what: str, condition, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f}s"
        time.sleep(0.05)
    return found


def _gone(handle: launcher.ProcessHandle) -> bool:
    return not launcher.is_alive(handle)


def _serving_process(outs) -> launcher.ProcessHandle:
    """The process that serves: the one the keeper runs (or the recorded one, without a keeper)."""
    return keeper.current(liveness.status_file(outs)) or liveness.handle(outs)


def test_a_killed_service_is_started_again_by_its_keeper_and_refresh_says_when_nothing_will(tmp_path, capsys):
    provider = LocalServiceProvider()
    outs = provider.create(_props(tmp_path, SERVER)).outs
    try:
        first = _serving_process(outs)
        os.kill(first.pid, signal.SIGKILL)
        _wait("the port answering again from a new process, with no `up`",
              lambda: _serving_process(outs).pid != first.pid and provider.read("svc", outs).outs["running"])
        log = (tmp_path / "svc" / "service.log").read_text()
        # how long it ran (0 s, more on a loaded machine: a Python's start)
        assert re.search(rf"mirrorstack keeper of svc: pid {first.pid} was killed by SIGKILL after \d+ s; starting it "
                         r"again in 0\.5 s", log), log
        assert provider.diff("svc", outs, outs).changes is False  # nothing for `up` to do

        # the keeper itself killed: the service goes with it, and refresh says what to run
        second = _serving_process(outs)
        os.kill(int(outs["pid"]), signal.SIGKILL)
        _wait("the kept process gone with its keeper", lambda: _gone(second))
        capsys.readouterr()
        assert provider.read("svc", outs).outs["running"] is False
        said = capsys.readouterr().err
        assert f"mirrorstack: svc is down, and so is its keeper (pid {outs['pid']})" in said, said
        assert "fix: `pulumi up` starts both" in said, said
        assert provider.diff("svc", outs, outs).changes is True  # `up` starts it again
    finally:
        provider.delete("svc", outs)
    assert leftover_processes(str(tmp_path)) == []


def test_a_service_down_between_two_starts_is_said_to_come_back_by_itself(tmp_path, capsys):
    """The kept process exits at once after its first run: refresh records it down, and says its keeper brings it
    back (no fix to run)."""
    marker = tmp_path / "first-run-done"
    once = [sys.executable, "-c", f"import os, sys, time, http.server; m = {str(marker)!r}\n"
            "if os.path.exists(m): sys.exit(4)\n"
            "open(m, 'w').close(); http.server.test(http.server.SimpleHTTPRequestHandler, port=PORT, "
            "bind='127.0.0.1')"]
    provider = LocalServiceProvider()
    outs = provider.create(_props(tmp_path, once)).outs
    try:
        os.kill(_serving_process(outs).pid, signal.SIGKILL)
        _wait("two exits (killed, then code 4)", lambda: ((keeper.read_status(liveness.status_file(outs)) or {})
                                                          .get("last_exit") or "").startswith("exited with code 4"))
        capsys.readouterr()
        # (the keeper starts it again and again, a moment each time: a read may land on one)
        _wait("refresh recording it down", lambda: provider.read("svc", outs).outs["running"] is False)
        said = capsys.readouterr().err.splitlines()[-1]
        assert re.search(r"mirrorstack: svc is down: it exited with code 4 after \d+ s; its keeper \(pid", said), said
        assert "starts it again within" in said and "nothing to do" in said and "fix:" not in said, said
    finally:
        provider.delete("svc", outs)
    assert leftover_processes(str(tmp_path)) == []


def test_a_kept_service_that_dies_at_its_first_start_fails_at_once_with_its_log(tmp_path):
    crasher = [sys.executable, "-c", "import sys; print('boom: bad config line 7', flush=True); sys.exit(3)"]
    started = time.monotonic()
    with pytest.raises(ServiceFailed, match="exited during start-up") as err:
        LocalServiceProvider().create(_props(tmp_path, crasher))
    assert "boom: bad config line 7" in str(err.value)
    assert time.monotonic() - started < 15  # not the 20 s health timeout, restart after restart
    assert leftover_processes(str(tmp_path)) == []


def test_refresh_names_a_dead_service_and_the_fix(tmp_path, capsys):
    """Without a keeper (brokers, controllers, Connect workers): refresh records it down and says so, not only
    `~ updated`."""
    provider = LocalServiceProvider()
    outs = provider.create(_props(tmp_path, SERVER, restart=None)).outs
    try:
        os.kill(int(outs["pid"]), signal.SIGKILL)
        _wait("the service gone", lambda: _gone(liveness.handle(outs)))
        capsys.readouterr()
        assert provider.read("svc", outs).outs["running"] is False
        said = capsys.readouterr().err
        assert f"mirrorstack: svc is down: its process (pid {outs['pid']}) is not running; its log: " \
               f"{outs['log_file']}; fix: `pulumi up` starts it" in said, said
    finally:
        provider.delete("svc", outs)
