"""Start, watch and stop detached service processes.

A process is identified by its pid AND its start time (from /proc), so a pid
reused by an unrelated program after a crash is never taken for ours, and is
never signalled. Each process runs in its own session (it outlives the Pulumi
provider that started it) and writes stdout+stderr to its own log file.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from mirrorstack.platforms.base import STOP_GRACE_SECONDS

log = logging.getLogger("mirrorstack.launcher")

# Popen objects of the processes this Python process started, kept so that
# their exit status can be collected (no zombies while we live).
_children: dict[int, subprocess.Popen] = {}


class ServiceFailed(RuntimeError):
    """A service died during start-up or never became healthy."""


@dataclass(frozen=True)
class ProcessHandle:
    name: str
    pid: int
    start_time: int  # clock ticks since boot, /proc/<pid>/stat field 22
    log_file: str

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping) -> ProcessHandle:
        return cls(name=data["name"], pid=int(data["pid"]),
                   start_time=int(data["start_time"]), log_file=data["log_file"])


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time) of a pid, or None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = raw[raw.rindex(")") + 2:].split()  # the command name may hold spaces
    return fields[0], int(fields[19])


def process_start_time(pid: int) -> int:
    """A live process's start time (what a ProcessHandle holds), -1 when it is gone."""
    stat = _stat(pid)
    return stat[1] if stat else -1


def _reap(pid: int) -> None:
    child = _children.get(pid)
    if child is not None and child.poll() is not None:
        _children.pop(pid, None)


def with_class_archive(argv: Sequence[str], env: Mapping[str, str] | None) -> Mapping[str, str] | None:
    """The environment a JVM of Kafka's jars starts with: its class-data archive,
    when `make class-archives` made one (tools/class_archives.py), through
    JDK_JAVA_OPTIONS rather than the command line: a deployed service's command
    line stays the one every platform shares, and a missing or stale archive
    only makes the start slower."""
    from mirrorstack import toolchain
    from mirrorstack.platforms import jvm
    argv = list(argv)
    try:
        classpath = toolchain.kafka_classpath()
    except toolchain.ToolMissing:
        return env
    if "-cp" not in argv[:-1] or argv[argv.index("-cp") + 1] != classpath or argv.index("-cp") + 2 >= len(argv):
        return env
    archive = toolchain.class_archive(jvm.class_archive_name(argv[argv.index("-cp") + 2]))
    if archive is None:
        return env
    base = dict(os.environ if env is None else env)
    options = f"{base.get('JDK_JAVA_OPTIONS', '')} -XX:SharedArchiveFile={archive}".strip()
    return {**base, "JDK_JAVA_OPTIONS": options}


def start(name: str, argv: Sequence[str], *, log_file: Path, cwd: Path | None = None,
          env: Mapping[str, str] | None = None) -> ProcessHandle:
    env = with_class_archive(argv, env)
    log_file = Path(log_file)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as out:
        child = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            cwd=cwd, env=dict(env) if env is not None else None,
            start_new_session=True, close_fds=True,
        )
    _children[child.pid] = child
    stat = _stat(child.pid)
    log.info("started %s (pid %s), log %s", name, child.pid, log_file)
    return ProcessHandle(name, child.pid, stat[1] if stat else -1, str(log_file))


def is_alive(handle: ProcessHandle) -> bool:
    _reap(handle.pid)
    stat = _stat(handle.pid)
    return stat is not None and stat[1] == handle.start_time and stat[0] not in ("Z", "X")


def _wait_gone(handle: ProcessHandle, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not is_alive(handle):
            return True
        time.sleep(0.1)
    return not is_alive(handle)


def stop(handle: ProcessHandle, grace_seconds: float = STOP_GRACE_SECONDS) -> bool:
    """TERM the process group, then KILL after the grace period (a process that
    exits sooner is not waited for).
    Returns False when the process was already gone."""
    if not is_alive(handle):
        return False
    for sig, wait in ((signal.SIGTERM, grace_seconds), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(handle.pid, sig)  # own session: pgid == pid
        except ProcessLookupError:
            return True
        if _wait_gone(handle, wait):
            return True
        log.warning("%s (pid %s) ignored %s for %.0fs", handle.name, handle.pid, sig.name, wait)
    raise ServiceFailed(f"{handle.name} (pid {handle.pid}) survived SIGKILL")


def log_tail(log_file: str | Path, lines: int = 40) -> str:
    try:
        text = Path(log_file).read_text(errors="replace")
    except FileNotFoundError:
        return "(no log file)"
    return "\n".join(text.splitlines()[-lines:])


def run(name: str, argv: Sequence[str], *, log_file: Path, timeout: float = 120.0,
        env: Mapping[str, str] | None = None) -> None:
    """Run a short-lived command to completion, failing with its log tail."""
    env = with_class_archive(argv, env)
    log_file = Path(log_file)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as out:
        done = subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=out,
                              stderr=subprocess.STDOUT, timeout=timeout,
                              env=dict(env) if env is not None else None)
    if done.returncode != 0:
        raise ServiceFailed(f"{name} exited with {done.returncode}. "
                            f"Last lines of {log_file}:\n{log_tail(log_file)}")


def wait_until_healthy(handle: ProcessHandle, check: Callable[[], bool], *,
                       timeout: float, what: str, interval: float = 0.5,
                       progress_every: float = 5.0, alive: Callable[[], bool] | None = None) -> float:
    """Poll `check` until it returns True. Fails at once if the process dies,
    and after `timeout` seconds otherwise, quoting the last check error and the
    end of the log. A check that is not ready yet returns False or raises
    (descriptions.NotReady says what it waits for); every `progress_every` seconds
    that is printed to stderr as `mirrorstack: <what>: <reason>` (Pulumi shows
    it next to the resource). `alive`: whether the service still runs, when the
    process is not the service itself (a keeper's first run). Returns the seconds waited."""
    started = time.monotonic()
    next_progress = started + progress_every
    last_error: Exception | None = None
    while True:
        try:
            if check():
                return time.monotonic() - started
        except Exception as exc:  # a check that cannot connect yet is just "not ready"
            last_error = exc
        now = time.monotonic()
        if not is_alive(handle) or (alive is not None and not alive()):
            raise ServiceFailed(f"{what} (pid {handle.pid}) exited during start-up. "
                                f"Last lines of {handle.log_file}:\n{log_tail(handle.log_file)}")
        if now - started > timeout:
            detail = f" Last check error: {last_error!r}." if last_error else ""
            raise ServiceFailed(f"{what} (pid {handle.pid}) not healthy after {timeout:.0f}s.{detail} "
                                f"Last lines of {handle.log_file}:\n{log_tail(handle.log_file)}")
        if now >= next_progress:
            print(f"mirrorstack: {what}: {_waiting_for(last_error)} ({now - started:.0f}s of {timeout:.0f}s)",
                  file=sys.stderr, flush=True)
            next_progress = now + progress_every
        time.sleep(interval)


def _waiting_for(error: Exception | None) -> str:
    from mirrorstack.platforms.descriptions import NotReady
    if isinstance(error, NotReady):
        return str(error)
    return f"not answering yet ({type(error).__name__}: {error})" if error else "not ready yet"
