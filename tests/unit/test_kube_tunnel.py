"""kube_tunnel opens a `kubectl port-forward` and reads its local port; a
kubectl that says nothing in time is started again (it happened at load 16), and
one that ends at once is started again after a pause, its own words reported."""
from __future__ import annotations

import os
import stat

import pytest

from mirrorstack.platforms.kubernetes import tunnel as kube_tunnel

# A stand-in kubectl: silent (and alive) on its first `silent` starts, then ending at once as kubectl
# does when its local port is taken on the next `ended`, then forwarding as kubectl says it does.
KUBECTL = """#!/bin/sh
count_file="{folder}/starts"
n=$(cat "$count_file" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$count_file"
if [ "$n" -le {silent} ]; then exec sleep 60; fi
if [ "$n" -le $(({silent} + {ended})) ]; then
  echo "Unable to listen on port 21861: bind: address already in use" >&2
  echo "error: unable to listen on any of the requested ports: [{{21861 9826}}]" >&2
  exit 1
fi
echo "Forwarding from 127.0.0.1:4${{n}}000 -> 8083"
exec sleep 60
"""


def _kubectl(tmp_path, monkeypatch, silent: int, ended: int = 0):
    script = tmp_path / "kubectl"
    script.write_text(KUBECTL.format(folder=tmp_path, silent=silent, ended=ended))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(kube_tunnel, "OPEN_TIMEOUT", 1.0)
    monkeypatch.setattr(kube_tunnel, "EXIT_PAUSES", (0.05, 0.1))
    monkeypatch.setattr(kube_tunnel, "EXIT_RETRY_SECONDS", 0.5)


def test_a_silent_kubectl_is_started_again(tmp_path, monkeypatch):
    _kubectl(tmp_path, monkeypatch, silent=1)
    url = kube_tunnel.address("ns", "service", "connect-0", 8083)
    try:
        assert kube_tunnel.local(url) == "http://127.0.0.1:42000"  # the second start's port
        assert kube_tunnel.local(url) == "http://127.0.0.1:42000"  # kept: not started a third time
        assert (tmp_path / "starts").read_text().strip() == "2"
    finally:
        kube_tunnel.close_all()


def test_a_kubectl_silent_every_time_says_so_after_its_tries(tmp_path, monkeypatch):
    _kubectl(tmp_path, monkeypatch, silent=99)
    url = kube_tunnel.address("ns", "service", "connect-0", 8083)
    with pytest.raises(kube_tunnel.TunnelError, match=r"could not open kube://ns/service/connect-0:8083 "
                       r"\(kubectl port-forward, 3 tries: 3 silent for 1s, 0 ended, 0s of pauses\): tries 1-3: "
                       r"no answer in 1s$"):
        kube_tunnel.local(url)
    assert (tmp_path / "starts").read_text().strip() == "3"


def test_a_kubectl_that_ends_at_once_is_started_again_after_a_pause(tmp_path, monkeypatch):
    _kubectl(tmp_path, monkeypatch, silent=0, ended=3)  # pauses 0.05, 0.1, 0.1: within the 0.5 s
    url = kube_tunnel.address("ns", "service", "edge-broker-0", 9826, local_port=21861)
    try:
        assert kube_tunnel.local(url, scheme="tcp") == "tcp://127.0.0.1:44000"  # its fourth start
    finally:
        kube_tunnel.close_all()


def test_a_kubectl_that_always_ends_says_why_and_who_holds_the_port(tmp_path, monkeypatch):
    _kubectl(tmp_path, monkeypatch, silent=0, ended=99)
    url = kube_tunnel.address("ns", "service", "edge-broker-0", 9826, local_port=21861)
    with pytest.raises(kube_tunnel.TunnelError) as raised:
        kube_tunnel.local(url)
    said = str(raised.value)
    starts = int((tmp_path / "starts").read_text())
    # pauses 0.05, 0.1, 0.1, ... until 0.5 s of them: 7 starts, their own words once
    assert starts == 7 and "7 tries: 0 silent for 1s, 7 ended" in said, said
    assert said.count("tries 1-7: kubectl ended (exit 1): Unable to listen on port 21861: bind: address already "
                      "in use; error: unable to listen on any of the requested ports") == 1, said
    assert "(held by: " in said, said  # `ss` asked who listens there
