"""Where a cluster master is: the addresses in its URL (`spark://h:p[,h:p]`,
`sc://h[:p]`, `k8s://https://h[:p]`), and whether one answers, asked before any JVM or session starts."""
from __future__ import annotations

import socket

CONNECT_PORT = 15002  # Spark Connect's default
MASTER_ANSWER_SECONDS = 5


def is_connect(master: str) -> bool:
    return master.startswith("sc://")


def master_endpoints(master: str) -> list[tuple[str, int]]:
    """(host, port) of each address in a cluster master's URL: `spark://h:p[,h:p]`, `sc://h[:p][/]` or
    `k8s://https://h[:p]` (a Kubernetes API server, port 443 by default)."""
    scheme, rest = master.split("://", 1)
    if scheme == "k8s":
        from urllib.parse import urlsplit
        api = urlsplit(rest)
        return [(api.hostname, api.port or (443 if api.scheme == "https" else 80))]
    if scheme == "sc":
        host, _, port = rest.split("/", 1)[0].partition(":")
        return [(host, int(port or CONNECT_PORT))]
    return [(host, int(port)) for host, _, port in (part.rpartition(":") for part in rest.split(","))]


def on_loopback(master: str) -> bool:
    return all(host in ("127.0.0.1", "localhost") for host, _ in master_endpoints(master))


class MasterUnreachable(RuntimeError):
    """Nothing answers at the master's address: Spark's own client would retry for a minute or more."""


def master_answers(master: str) -> None:
    """Before any JVM or session: one address of the master answering TCP is enough."""
    error = None
    for host, port in master_endpoints(master):
        try:
            socket.create_connection((host, port), timeout=MASTER_ANSWER_SECONDS).close()
            return
        except OSError as exc:
            error = exc
    where = ", ".join(f"{host}:{port}" for host, port in master_endpoints(master))
    raise MasterUnreachable(f"validation.master (--master) {master}: nothing answers at {where} ({error}); "
                            "fix: start it, or correct validation.master")
