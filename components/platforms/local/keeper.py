"""The local platform's restart policy: a small process that keeps one service
running, as Docker's `unless-stopped` and a Deployment do on the other platforms.

    python -m mirrorstack.platforms.local.keeper <name> <status.json> -- <argv...>

It starts `argv` (in its own process group, writing to the keeper's stdout:
the service's log) and, whenever it exits or is killed, starts it again: after
0.5 s, doubling for each exit within 10 s of its start, at most 60 s apart
(Docker's policy, slower at first). It stops when it is told to (TERM or INT,
to the keeper or its group: `launcher.stop`), and the service with it; a
keeper that is killed takes its service along (the kernel TERMs it), so a
service is never left running without the record of its pid. Every start and
exit is a line of the log, and `<status.json>` says which process runs now
(read_status, current). Imports no pulumi and nothing of the project but the
launcher's process identity.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from mirrorstack.platforms.local.launcher import ProcessHandle, process_start_time

MODULE = "mirrorstack.platforms.local.keeper"
STATUS_FILE = "keeper.json"  # in the service's folder
POLICY = "unless-stopped"  # the one policy: LocalService's `restart`
FIRST_DELAY = 0.5  # seconds before the first start again
MAX_DELAY = 60.0
STEADY_SECONDS = 10.0  # a run this long starts the back-off over


def command(name: str, status_file: str, argv: list[str]) -> list[str]:
    """The command line that runs `argv` under a keeper (this Python)."""
    return [sys.executable, "-m", MODULE, name, status_file, "--", *argv]


def delay(quick_exits: int) -> float:
    """Seconds before the next start, after `quick_exits` exits in a row within
    STEADY_SECONDS of their start (0: it had run for a while)."""
    return min(FIRST_DELAY * 2 ** max(quick_exits - 1, 0), MAX_DELAY)


def describe(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def read_status(path: str | Path) -> dict | None:
    """What the keeper wrote last (None before its first start): pid, start_time,
    starts, last_exit, next_start_at (epoch seconds while it waits to start again)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def current(path: str | Path) -> ProcessHandle | None:
    """The process the keeper runs now (check it with launcher.is_alive), or None."""
    status = read_status(path)
    if not status or not status.get("pid"):
        return None
    return ProcessHandle(status["name"], int(status["pid"]), int(status["start_time"]), status.get("log_file", ""))


def first_run_lasts(path: str | Path) -> bool:
    """The keeper's first run has not ended (yet): a start-up waits on nothing else."""
    status = read_status(path)
    return status is None or (status.get("starts") == 1 and status.get("pid") is not None)


def _write_status(path: Path, status: dict) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(status, sort_keys=True))
    partial.replace(path)  # readers never see half a file


def _say(name: str, message: str) -> None:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"{stamp} mirrorstack keeper of {name}: {message}", flush=True)


def _die_with_keeper(keeper: int):
    """In the child before exec: the kernel TERMs it when the keeper dies (even by KILL)."""
    def arm() -> None:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != keeper:  # the keeper died before the line above
            os._exit(1)
    return arm


def keep(name: str, status_file: str, argv: list[str]) -> int:
    status_path = Path(status_file)
    stopping = threading.Event()
    child: subprocess.Popen | None = None

    def stop(signum, _frame) -> None:
        stopping.set()
        if child is not None and child.poll() is None:  # a TERM to the keeper alone stops both
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    starts, quick, last_exit = 0, 0, None
    while not stopping.is_set():
        started = time.monotonic()
        starts += 1
        try:
            child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, preexec_fn=_die_with_keeper(os.getpid()))
        except OSError as exc:
            child, why = None, f"could not be started ({exc})"
        else:
            _write_status(status_path, {"name": name, "pid": child.pid, "start_time": process_start_time(child.pid),
                                        "starts": starts, "last_exit": last_exit, "next_start_at": None})
            if starts > 1:
                _say(name, f"started it again (pid {child.pid}, start {starts})")
            why = describe(child.wait())
        if stopping.is_set():
            break
        ran = time.monotonic() - started
        quick = quick + 1 if ran < STEADY_SECONDS else 0
        pause = delay(quick)
        last_exit = f"{why} after {ran:.0f} s"
        _write_status(status_path, {"name": name, "pid": None, "start_time": None, "starts": starts,
                                    "last_exit": last_exit, "next_start_at": time.time() + pause})
        _say(name, f"{f'pid {child.pid}' if child else 'it'} {last_exit}; starting it again in {pause:g} s")
        stopping.wait(pause)
    return 0


def main(args: list[str]) -> int:
    if len(args) < 4 or args[2] != "--":
        print(f"usage: python -m {MODULE} <name> <status.json> -- <argv...>", file=sys.stderr)
        return 2
    return keep(args[0], args[1], args[3:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
