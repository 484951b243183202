"""The launcher against real OS processes (small Python programs)."""
import sys
import time

import pytest

from mirrorstack.platforms.local import launcher
from mirrorstack.platforms.local.launcher import ProcessHandle, ServiceFailed
from tests.support.leftovers import leftover_processes

SLEEPER = [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(300)"]
STUBBORN = [sys.executable, "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ignoring TERM', flush=True); time.sleep(300)"]
CRASHER = [sys.executable, "-c", "import sys; print('boom: bad config line 7', flush=True); sys.exit(3)"]


def test_start_is_alive_stop(tmp_path):
    handle = launcher.start("sleeper", SLEEPER, log_file=tmp_path / "sleeper.log")
    try:
        assert launcher.is_alive(handle)
        launcher.wait_until_healthy(handle, lambda: "ready" in (tmp_path / "sleeper.log").read_text(),
                                    timeout=10, what="sleeper")
    finally:
        assert launcher.stop(handle, grace_seconds=5) is True
    assert not launcher.is_alive(handle)
    assert launcher.stop(handle) is False  # already gone: nothing to do


def test_handle_survives_serialisation(tmp_path):
    handle = launcher.start("sleeper", SLEEPER, log_file=tmp_path / "s.log")
    try:
        again = ProcessHandle.from_dict(handle.to_dict())
        assert again == handle and launcher.is_alive(again)
    finally:
        launcher.stop(handle)


def test_reused_pid_is_not_taken_for_ours(tmp_path):
    handle = launcher.start("sleeper", SLEEPER, log_file=tmp_path / "s.log")
    try:
        impostor = ProcessHandle("old", handle.pid, handle.start_time - 1, handle.log_file)
        assert not launcher.is_alive(impostor)
        assert launcher.stop(impostor) is False  # never signalled
        assert launcher.is_alive(handle)
    finally:
        launcher.stop(handle)


def test_process_ignoring_term_is_killed_after_grace(tmp_path):
    log = tmp_path / "stubborn.log"
    handle = launcher.start("stubborn", STUBBORN, log_file=log)
    launcher.wait_until_healthy(handle, lambda: "ignoring" in log.read_text(), timeout=10, what="stubborn")
    started = time.monotonic()
    assert launcher.stop(handle, grace_seconds=1) is True
    assert not launcher.is_alive(handle)
    assert time.monotonic() - started < 10


def test_death_during_startup_fails_at_once_with_log_tail(tmp_path):
    handle = launcher.start("crasher", CRASHER, log_file=tmp_path / "crasher.log")
    started = time.monotonic()
    with pytest.raises(ServiceFailed, match="exited during start-up") as err:
        launcher.wait_until_healthy(handle, lambda: False, timeout=60, what="crasher")
    assert "boom: bad config line 7" in str(err.value)
    assert time.monotonic() - started < 30


def test_timeout_names_the_service_and_last_error(tmp_path):
    handle = launcher.start("sleeper", SLEEPER, log_file=tmp_path / "s.log")
    try:
        def never():
            raise ConnectionRefusedError("port 1 closed")
        with pytest.raises(ServiceFailed, match=r"sleeper-service .*not healthy after 1s.*port 1 closed"):
            launcher.wait_until_healthy(handle, never, timeout=1, what="sleeper-service", interval=0.1)
    finally:
        launcher.stop(handle)


def test_run_raises_with_exit_code_and_log(tmp_path):
    with pytest.raises(ServiceFailed, match=r"(?s)format exited with 3.*boom"):
        launcher.run("format", CRASHER, log_file=tmp_path / "run.log")
    launcher.run("ok", [sys.executable, "-c", "print('fine')"], log_file=tmp_path / "ok.log")
    assert "fine" in (tmp_path / "ok.log").read_text()


def test_leftover_check_sees_a_running_process_and_not_a_stopped_one(tmp_path):
    marker = str(tmp_path / "marker-dir")
    argv = SLEEPER + [marker]
    handle = launcher.start("marked", argv, log_file=tmp_path / "m.log")
    try:
        # the child shows its own command line once it has exec'd: on a loaded machine not at once
        deadline = time.monotonic() + 10
        while not leftover_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [p.pid for p in leftover_processes(marker)] == [handle.pid]
    finally:
        launcher.stop(handle)
    assert leftover_processes(marker) == []


def test_a_service_whose_port_another_process_holds_is_refused_before_it_starts(tmp_path):
    """Two stacks in one port range: the second's Connect would pass its health
    check against the first's worker. It is refused, naming the port."""
    import socket
    from mirrorstack.platforms.local.service import _launch
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        props = {"name": "dr-connect-0", "workdir": str(tmp_path / "svc"), "files": {}, "prepare": [],
                 "argv": [sys.executable, "-c", "import time; time.sleep(30)"], "timeout_seconds": "5",
                 "health": {"kind": "connect", "url": f"http://127.0.0.1:{port}"}}
        with pytest.raises(RuntimeError, match=f"dr-connect-0: port {port} on 127.0.0.1 is already in use"):
            _launch(props)
    assert not leftover_processes(str(tmp_path))  # nothing was started


def _tools(tmp_path, monkeypatch, archives=("broker.jsa", "connect.jsa")):
    from mirrorstack import versions
    libs = tmp_path / "kafka" / "libs"
    libs.mkdir(parents=True)
    (libs / f"kafka_2.13-{versions.kafka_version()}.jar").touch()
    (tmp_path / "class-archives").mkdir()
    for name in archives:
        (tmp_path / "class-archives" / name).touch()
    monkeypatch.setenv("MIRRORSTACK_TOOLS_DIR", str(tmp_path))
    return f"{libs}/*"


def test_kafka_jvms_start_with_their_class_archive_through_the_environment(tmp_path, monkeypatch):
    from mirrorstack.platforms import jvm
    classpath = _tools(tmp_path, monkeypatch)
    broker = jvm.java_command("java", jvm.BROKER_MAIN, ["s.properties"], classpath=classpath, heap="1g")
    env = launcher.with_class_archive(broker, {"PATH": "/bin", "JDK_JAVA_OPTIONS": "-Dx=1"})
    assert env == {"PATH": "/bin", "JDK_JAVA_OPTIONS": f"-Dx=1 -XX:SharedArchiveFile={tmp_path}/class-archives/broker.jsa"}
    worker = jvm.java_command("java", jvm.CONNECT_DISTRIBUTED_MAIN, ["w.properties"], classpath=classpath, heap="1g")
    assert launcher.with_class_archive(worker, {})["JDK_JAVA_OPTIONS"] == \
        f"-XX:SharedArchiveFile={tmp_path}/class-archives/connect.jsa"
    tool = jvm.java_command("java", jvm.STORAGE_TOOL_MAIN, ["format"], classpath=classpath, heap="256m",
                            short_lived=True)
    assert "broker.jsa" in launcher.with_class_archive(tool, {})["JDK_JAVA_OPTIONS"]
    # anything else, or other jars, starts as it is; so does a JVM whose archive was not made
    assert launcher.with_class_archive(["prometheus", "--config.file=x"], {"A": "1"}) == {"A": "1"}
    other = jvm.java_command("java", jvm.BROKER_MAIN, ["s.properties"], classpath="/elsewhere/*", heap="1g")
    assert launcher.with_class_archive(other, None) is None
    (tmp_path / "class-archives" / "connect.jsa").unlink()
    assert launcher.with_class_archive(worker, {}) == {}


LAUNCH_FROM_PICKLE = """
import pickle, sys
from mirrorstack.platforms.local.service import _launch
try:
    _launch(pickle.loads(sys.stdin.buffer.read()))
except RuntimeError as error:
    print(error)
print("imported by name:", "tests.support.named_checks" in sys.modules)
"""


def test_a_service_is_checked_with_the_functions_its_health_spec_names_in_a_fresh_process(tmp_path):
    """A concept's own readiness reaches the local platform as names (no import of
    kafka/ or connect/ there): a dynamic provider's process, given the pickled
    inputs, imports them where it runs them: `check` until the service is ready,
    then `once_healthy`, whose failure stops the service and fails the start."""
    import pickle
    import subprocess
    from pathlib import Path
    from mirrorstack.platforms.descriptions import CHECK, ONCE_HEALTHY
    marker = tmp_path / "ready"
    props = {"name": "named-0", "workdir": str(tmp_path / "svc"), "files": {}, "prepare": [], "timeout_seconds": "30",
             "argv": [sys.executable, "-c", f"import pathlib, time; pathlib.Path({str(marker)!r}).touch(); "
                      "time.sleep(300)"],
             "health": {"kind": "named", "marker": str(marker), CHECK: "tests.support.named_checks:marker_written",
                        ONCE_HEALTHY: "tests.support.named_checks:refuse"},
             "health_secrets": {"app1": "pw"}}
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", LAUNCH_FROM_PICKLE], input=pickle.dumps(props), cwd=root,
                          capture_output=True, timeout=60)
    assert done.stdout.decode().splitlines() == ["named-0 refused: users ['app1'], alive True, log service.log",
                                                 "imported by name: True"], done.stderr.decode()[-2000:]
    assert marker.exists()  # it ran, and `check` waited for it
    assert not leftover_processes(str(tmp_path))  # stopped after the refusal
