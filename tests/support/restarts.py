"""Which Kafka node runs now (/proc), and when services were down during an
`up` (its event log): to tell a rolling restart from one of everything at once."""
from __future__ import annotations

from pathlib import Path


def kafka_node(local: Path, service: str) -> int:
    """The pid of the node's running broker/controller JVM."""
    config = f"{local}/{service}/server.properties".encode()
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0") if proc.name.isdigit() else []
        except OSError:
            continue
        if b"kafka.Kafka" in args and config in args:
            return int(proc.name)
    raise AssertionError(f"no running JVM of {service} under {local}")


def _json_objects(text: str):
    """The top-level JSON objects of a text, one a line or indented."""
    import json
    decoder, i = json.JSONDecoder(), 0
    while (i := text.find("{", i)) != -1:
        try:
            obj, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i += 1
            continue
        yield obj


def update_windows(event_log: Path, services: list[str]) -> dict[str, tuple[int, int]]:
    """service → (when its update step began, when it ended), Unix seconds, from
    `pulumi up --json` (its stdout): a local service is stopped at the step's start and
    healthy again at its end, so that is the time it was down."""
    began, ended = {}, {}
    for event in _json_objects(event_log.read_text()):
        for kind, into in (("resourcePreEvent", began), ("resOutputsEvent", ended)):
            meta = (event.get(kind) or {}).get("metadata") or {}
            if meta.get("op") in ("update", "replace") and "LocalService" in meta.get("type", ""):
                name = meta["urn"].rsplit("::", 1)[1]
                for service in services:
                    if name == service or name.endswith(f"-{service}"):
                        into[service] = int(event["timestamp"])
    return {s: (began[s], ended[s]) for s in services if s in began and s in ended}


def overlapping_restarts(windows: dict[str, tuple[int, int]]) -> list[tuple[str, str]]:
    """Pairs of services down at the same time: one's update began before the
    update begun before it had ended. [] = one at a time."""
    ordered = sorted((begin, end, s) for s, (begin, end) in windows.items())
    return [(a, b) for (_, a_end, a), (b_begin, _, b) in zip(ordered, ordered[1:]) if b_begin < a_end]
