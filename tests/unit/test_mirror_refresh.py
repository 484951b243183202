"""What `pulumi refresh` says of a flow whose Connect does not answer (a port
where nothing listens: a real refused connection). The engine's refresh reads
each resource, then diffs what it read against the program, in the same
provider process; a preview only diffs. Against a real stack:
tests/integration/test_connect_faults.py."""
from __future__ import annotations

from mirrorstack.connect.api import PROBE_TIMEOUT
from mirrorstack.mirror.provider import MirrorMaker2Provider
from tests.support.ports import free_ports

CONNECTORS = {"src->tgt.MirrorSourceConnector": {"connector.class": "x"}}


def _props(url: str) -> dict:
    return {"flow": "src->tgt", "connect_url": url, "connectors": CONNECTORS, "timeout_seconds": "300",
            "states": {name: {"state": "RUNNING", "tasks": "1", "running_tasks": "1"} for name in CONNECTORS}}


def test_a_refresh_with_connect_down_says_so_in_one_line(capsys):
    url = "http://127.0.0.1:%d" % free_ports(1)[0]
    provider, props = MirrorMaker2Provider(), _props(url)
    read = provider.read("src->tgt", props).outs
    assert read["states"]["src->tgt.MirrorSourceConnector"]["state"] == "UNREACHABLE"
    assert provider.diff("src->tgt", read, props).changes is True  # the refresh's diff: `up` has work to do
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("mirrorstack: ")]
    assert len(said) == 1 and said[0].startswith(f"mirrorstack: src->tgt: Kafka Connect at {url} is down "), said
    assert "fix: `pulumi up` restarts the Connect workers" in said[0]


def test_a_preview_with_connect_down_says_it_could_not_check(capsys):
    url = "http://127.0.0.1:%d" % free_ports(1)[0]
    MirrorMaker2Provider().diff("src->tgt", _props(url), _props(url))
    said = capsys.readouterr().err
    assert f"src->tgt: Kafka Connect at {url} did not answer within {PROBE_TIMEOUT}s" in said, said
