"""Whether a local service's process runs, from what its LocalService recorded
(pid, start time; a kept service's keeper status file), and what `pulumi
refresh` says when it does not: what is gone, and what brings it back.
Imports no pulumi."""
from __future__ import annotations

import math
import time
from pathlib import Path

from mirrorstack.platforms.local import keeper, launcher


def handle(props) -> launcher.ProcessHandle:
    return launcher.ProcessHandle(props["name"], int(props["pid"]), int(props["start_time"]), props["log_file"])


def running(props) -> bool:
    """The recorded process runs: the service, or a kept service's keeper."""
    return bool(props.get("pid")) and launcher.is_alive(handle(props))


def status_file(props) -> Path:
    return Path(props["workdir"]) / keeper.STATUS_FILE


def serving(props) -> bool:
    """The service's own process runs (a kept one: its keeper, and the process it keeps)."""
    if not props.get("restart") or not running(props):
        return running(props)
    kept = keeper.current(status_file(props))
    return kept is not None and launcher.is_alive(kept)


def down_message(props) -> str:
    """What refresh says of a service whose process does not run."""
    name, log = props["name"], props.get("log_file")
    if props.get("restart") and running(props):
        status = keeper.read_status(status_file(props)) or {}
        wait = max(math.ceil((status.get("next_start_at") or 0) - time.time()), 1)
        return (f"{name} is down: it {status.get('last_exit') or 'exited'}; its keeper (pid {props['pid']}) starts "
                f"it again within {wait} s, nothing to do; its log: {log}")
    if props.get("restart"):
        return (f"{name} is down, and so is its keeper (pid {props.get('pid')}), which starts it again when it "
                f"exits: nothing starts it until `pulumi up`; its log: {log}; fix: `pulumi up` starts both")
    return (f"{name} is down: its process (pid {props.get('pid')}) is not running; its log: {log}; "
            "fix: `pulumi up` starts it")
