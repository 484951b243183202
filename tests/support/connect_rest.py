"""Reads from Kafka Connect's REST API for tests. Right after an update the
group rebalances and a worker refuses reads for a few seconds, with 409 (stale
configuration) or 500 (RebalanceNeededException): asked again, as
mirrorstack's own client does (components/connect/api.py)."""
from __future__ import annotations

import time

import requests

REBALANCE_WAIT = 60  # seconds


def read(url: str, **kwargs):
    """GET `url` and return its JSON, retrying while the Connect group rebalances."""
    deadline = time.monotonic() + REBALANCE_WAIT
    while True:
        reply = requests.get(url, timeout=10, **kwargs)
        rebalancing = reply.status_code == 409 or (reply.status_code == 500 and "rebalance" in reply.text)
        if not rebalancing or time.monotonic() > deadline:
            assert reply.ok, (url, reply.status_code, reply.text)
            return reply.json()
        time.sleep(1)
