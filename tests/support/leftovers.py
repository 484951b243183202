"""Find processes a test run left behind, with `ps`."""
from __future__ import annotations

import os
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
    is `parent` (e.g. Spark's JVM, a child of the test process)."""
    # -ww: never cut the command line to $COLUMNS (pytest sets it).
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,stat=,args="], capture_output=True,
                         text=True, check=True).stdout
    me = os.getpid()
    found = []
    for line in out.splitlines():
        pid, ppid, stat, args = (line.split(None, 3) + [""])[:4]
        pid, ppid = int(pid), int(ppid)
        if pid == me or stat.startswith("Z") or args.startswith("ps "):
            continue
        if marker in args or (parent is not None and ppid == parent):
            found.append(Leftover(pid, ppid, args[:300]))
    return found
