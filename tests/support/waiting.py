"""Waiting for a condition in tests (never a fixed sleep), and Prometheus's answers to wait on."""
from __future__ import annotations

import time

import requests


def wait_until(what: str, check, timeout: float = 120, every: float = 2):
    """`check()`'s first truthy answer within `timeout` seconds, asked every `every`; else fail naming
    `what` and the last answer."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"{what}: not within {timeout:.0f}s (last: {last!r})")


def wait_until_equal(what: str, read, expected, timeout: float = 120, every: float = 2):
    """Wait until `read()` answers `expected`; else fail naming `what`, the last answer and the one
    expected (wait_until's last answer of a comparison would only be False)."""
    seen = []

    def check():
        seen[:] = [read()]
        return seen[0] == expected
    try:
        return wait_until(what, check, timeout, every)
    except AssertionError:
        raise AssertionError(f"{what}: not within {timeout:.0f}s (last: {seen[0]!r}, expected {expected!r})") from None


def prometheus_query(prometheus: str, expr: str) -> list[dict]:
    """An instant query's result vector."""
    reply = requests.get(f"{prometheus}/api/v1/query", params={"query": expr}, timeout=10)
    reply.raise_for_status()
    return reply.json()["data"]["result"]
