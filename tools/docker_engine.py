"""A Docker engine to build images and run containers on, started only when none answers.

`ensure_engine()` uses, in order: `DOCKER_HOST` when it answers; the standard
socket /var/run/docker.sock when it answers; the private engine's socket when it
already answers (started by someone else: reused, never stopped by us); else it
starts the PRIVATE dockerd below and says so (`Engine.started`).

The private dockerd keeps everything to itself: its own socket, pid file, exec
root (with the containerd it runs) and log under PRIVATE_DIR, and its data root
outside the clone (DATA_ROOT: built images survive a fresh clone, so a warm
`make images` takes seconds). It runs without the default bridge
(`--bridge=none`): no `docker0` to clash with another engine on the machine;
our containers run on user-defined networks (name resolution, ports published
on 127.0.0.1 work there as usual).

`stop_engine(engine)` stops only an engine this process started. Whoever uses
the engine holds the heavy lock (`flock /tmp/mirrorstack-heavy.lock`), so one
user never stops it under another.

CLI: `python -m tools.docker_engine start|stop|status` (`stop` stops the private
engine only, never the standard or DOCKER_HOST one).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import docker
from docker.errors import DockerException

PRIVATE_DIR = Path("/run/mirrorstack-docker")
SOCKET = PRIVATE_DIR / "docker.sock"
PID_FILE = PRIVATE_DIR / "dockerd.pid"
EXEC_ROOT = PRIVATE_DIR / "exec"
LOG_FILE = PRIVATE_DIR / "dockerd.log"
DATA_ROOT = Path("/var/lib/mirrorstack-docker")
PRIVATE_URL = f"unix://{SOCKET}"
STANDARD_URL = "unix:///var/run/docker.sock"
START_TIMEOUT = 90  # seconds; the first start creates the data root
STOP_TIMEOUT = 60  # dockerd stops its containers first (10 s each at most)
API_TIMEOUT = 300  # seconds per API call: an image build's context upload takes a while
PING_TIMEOUT = 10
INSTALL_HINT = "run `make docker-engine` (installs Debian's docker.io)"

# dockerd processes this Python process started (pid -> Popen), to reap them on stop.
_children: dict[int, subprocess.Popen] = {}


class EngineError(RuntimeError):
    pass


@dataclass
class Engine:
    client: docker.DockerClient
    base_url: str
    started: bool  # True: this process started the private dockerd (stop_engine stops it)


def dockerd_command() -> list[str]:
    """The private dockerd's command line."""
    return ["dockerd", f"--host={PRIVATE_URL}", f"--pidfile={PID_FILE}", f"--exec-root={EXEC_ROOT}",
            f"--data-root={DATA_ROOT}", "--bridge=none"]


def answering(base_url: str | None) -> docker.DockerClient | None:
    """A client of the engine at `base_url` (None: DOCKER_HOST and its TLS
    variables) when it answers a ping, else None."""
    try:
        client = (docker.from_env(timeout=API_TIMEOUT) if base_url is None
                  else docker.DockerClient(base_url=base_url, timeout=API_TIMEOUT))
    except DockerException:
        return None
    try:
        client.api.timeout = PING_TIMEOUT  # a hung engine must not hold us for minutes
        client.ping()
        client.api.timeout = API_TIMEOUT
        return client
    except Exception:  # refused, missing socket, not an engine: all mean "does not answer"
        client.close()
        return None


def ensure_engine(timeout: float = START_TIMEOUT) -> Engine:
    """An engine that answers; starts the private dockerd when none does."""
    if os.environ.get("DOCKER_HOST"):
        client = answering(None)
        if client:
            return Engine(client, os.environ["DOCKER_HOST"], started=False)
    for url in (STANDARD_URL, PRIVATE_URL):
        client = answering(url)
        if client:
            return Engine(client, url, started=False)
    return Engine(_start_private(timeout), PRIVATE_URL, started=True)


def _start_private(timeout: float) -> docker.DockerClient:
    if not shutil.which("dockerd"):
        raise EngineError(f"no Docker engine answers and `dockerd` is not installed: {INSTALL_HINT}")
    if os.geteuid() != 0:
        raise EngineError("no Docker engine answers, and starting the private dockerd needs root "
                          f"(run as root, or start an engine at {STANDARD_URL} or DOCKER_HOST)")
    stale = running_pid()
    if stale is not None:  # alive but not answering: a hung or half-started engine of someone else
        raise EngineError(f"the private dockerd (pid {stale}, {PID_FILE}) runs but does not answer on "
                          f"{SOCKET}; see {LOG_FILE}, stop it (`python -m tools.docker_engine stop`) and retry")
    for folder in (PRIVATE_DIR, EXEC_ROOT, DATA_ROOT):
        folder.mkdir(parents=True, exist_ok=True)
    PRIVATE_DIR.chmod(0o700)
    with open(LOG_FILE, "ab") as log:
        # Its own session: it outlives this process (the CLI `start`) and gets no terminal signals.
        process = subprocess.Popen(dockerd_command(), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                   start_new_session=True)
    _children[process.pid] = process
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            _children.pop(process.pid, None)
            raise EngineError(f"the private dockerd exited with status {process.returncode} while starting; "
                              f"{LOG_FILE} ends with:\n{log_tail()}")
        client = answering(PRIVATE_URL)
        if client:
            return client
        time.sleep(0.3)
    _terminate(process.pid, STOP_TIMEOUT)
    raise EngineError(f"the private dockerd did not answer on {SOCKET} within {timeout:.0f} s (stopped it); "
                      f"{LOG_FILE} ends with:\n{log_tail()}")


def stop_engine(engine: Engine, timeout: float = STOP_TIMEOUT) -> None:
    """Stop the engine if this process started it (else leave it alone)."""
    engine.client.close()
    if engine.started:
        stop_private(timeout)


def stop_private(timeout: float = STOP_TIMEOUT) -> bool:
    """SIGTERM the private dockerd (pid file) and wait until it is gone; False when none runs."""
    pid = running_pid()
    if pid is None:
        return False
    _terminate(pid, timeout)
    return True


def _terminate(pid: int, timeout: float) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return
        time.sleep(0.2)
    raise EngineError(f"the private dockerd (pid {pid}) did not stop within {timeout:.0f} s of SIGTERM; "
                      f"{LOG_FILE} ends with:\n{log_tail()}")


def alive(pid: int) -> bool:
    child = _children.get(pid)
    if child is not None:  # ours: reap it, so it does not linger as a zombie
        if child.poll() is None:
            return True
        _children.pop(pid, None)
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def running_pid() -> int | None:
    """The pid in PID_FILE when that process is alive and is a dockerd."""
    try:
        pid = int(PID_FILE.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except (FileNotFoundError, ProcessLookupError):
        return None
    return pid if Path(command.decode(errors="replace")).name == "dockerd" and alive(pid) else None


def log_tail(lines: int = 20) -> str:
    try:
        return "\n".join(LOG_FILE.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def status() -> tuple[bool, str]:
    """Whether an engine answers, and which one `ensure_engine` would use now."""
    if os.environ.get("DOCKER_HOST") and answering(None):
        return True, f"DOCKER_HOST {os.environ['DOCKER_HOST']} answers"
    if answering(STANDARD_URL):
        return True, f"the standard engine answers ({STANDARD_URL})"
    if answering(PRIVATE_URL):
        return True, f"the private engine answers ({PRIVATE_URL}, pid {running_pid()})"
    return False, "no engine answers (`start` starts the private one)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.docker_engine", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["start", "stop", "status"])
    action = parser.parse_args(argv).action
    try:
        if action == "start":
            engine = ensure_engine()
            engine.client.close()
            print(f"started the private engine: {engine.base_url} (pid {running_pid()})" if engine.started
                  else f"an engine answers already: {engine.base_url}")
        elif action == "stop":
            print("stopped the private engine" if stop_private() else "the private engine does not run")
        else:
            answers, text = status()
            print(text)
            return 0 if answers else 1
    except EngineError as error:
        print(f"docker_engine: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
