"""Find processes a test run left behind, with `ps`."""
from __future__ import annotations

import os
import re
import signal
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class Leftover:
    pid: int
    ppid: int
    args: str


def leftover_processes(marker: str, parent: int | None = None) -> list[Leftover]:
    """Live (non-zombie) processes whose command line contains `marker` (the
    run's temp dir, which every service's config path is under) or whose parent
    is `parent` (e.g. Spark's JVM, a child of the test process). The test
    process and its ancestors (e.g. `flock … pytest --basetemp=…`) are not."""
    # -ww: never cut the command line to $COLUMNS (pytest sets it).
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,stat=,args="], capture_output=True,
                         text=True, check=True).stdout
    rows = [(line.split(None, 3) + [""])[:4] for line in out.splitlines()]
    parents = {int(pid): int(ppid) for pid, ppid, _, _ in rows}
    mine, pid = set(), os.getpid()
    while pid > 1 and pid not in mine:  # this process and its ancestors
        mine.add(pid)
        pid = parents.get(pid, 0)
    # The marker as a whole path: /tmp/pt-a must not match /tmp/pt-a2 (another run's temp dir).
    whole = re.compile(re.escape(marker) + r"(?![\w.-])")
    found = []
    for pid, ppid, stat, args in rows:
        pid, ppid = int(pid), int(ppid)
        if pid in mine or stat.startswith("Z") or args.startswith("ps "):
            continue
        if whole.search(args) or (parent is not None and ppid == parent):
            found.append(Leftover(pid, ppid, args[:300]))
    return found


def kill_leftovers(marker: str, parent: int | None = None) -> list[Leftover]:
    """SIGKILL what leftover_processes finds (its process group when it leads one) and
    return it: processes this run started, found by its own temp dir, never by name."""
    found = leftover_processes(marker, parent)
    for proc in found:
        for kill in (os.killpg, os.kill):  # group leader or not
            try:
                kill(proc.pid, signal.SIGKILL)
                break
            except (ProcessLookupError, PermissionError):
                continue
    return found
