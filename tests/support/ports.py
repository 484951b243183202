"""Ports for the services tests and benchmarks start themselves (not stacks:
those take a range of tests.support.stacks.port_base()).

Picked above the kernel's ephemeral range (net.ipv4.ip_local_port_range): a
port bound to 0 comes from that range, which every outgoing connection on the
machine also draws from, so one could take it between the pick and the
service's own bind ("Address already in use", seen under the suite's load).
Each xdist worker takes every n-th port of its own, like the stacks' ranges. The
test cluster's 127.0.0.1 ports (tools/kube/layout.py) are never handed out."""
import itertools
import os
import random
import socket
from pathlib import Path

from tools.kube import layout as kube_layout

STACK_PORTS = range(5000, 30000)  # tests.support.stacks' ranges (a stack's default base is 10000 or above)


def _ephemeral() -> range:
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    return range(low, high + 1)


def worker_share(items: list[int], what: str, worker: str | None = None, workers: int | None = None) -> list[int]:
    """A test process's share of `items` (this one's unless `worker`, `workers` are
    given): all of them outside xdist, else every n-th one from the worker's index
    (gw<k>), so two workers never pick the same."""
    if workers is None:
        worker, workers = os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker or workers <= 1:
        return items
    if workers > len(items):
        raise RuntimeError(f"{workers} xdist workers but only {len(items)} {what}; run -n {len(items)} or fewer")
    return items[int(worker.removeprefix("gw")) % workers::workers]


_PORTS = worker_share([p for p in range(1024, 65536) if p not in _ephemeral() and p not in STACK_PORTS
                       and p not in kube_layout.LOOPBACK_PORTS], "ports")
_NEXT = itertools.count(random.randrange(len(_PORTS)))


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> list[int]:
    """`count` distinct ports on 127.0.0.1, free now, from this process's share."""
    picked: list[int] = []
    for _ in range(len(_PORTS)):
        port = _PORTS[next(_NEXT) % len(_PORTS)]
        if port not in picked and _bindable(port):
            picked.append(port)
            if len(picked) == count:
                return picked
    raise RuntimeError(f"fewer than {count} free ports among this process's {len(_PORTS)}")
