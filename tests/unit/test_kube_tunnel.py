"""kube_tunnel opens a `kubectl port-forward` and reads its local port; a
kubectl that says nothing in time is started again (it happened at load 16)."""
from __future__ import annotations

import os
import stat

import pytest

from mirrorstack.platforms.kubernetes import tunnel as kube_tunnel

# A stand-in kubectl: silent (and alive) on its first start, then forwards as kubectl says it does.
KUBECTL = """#!/bin/sh
count_file="{folder}/starts"
n=$(cat "$count_file" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$count_file"
if [ "$n" -le {silent} ]; then exec sleep 60; fi
echo "Forwarding from 127.0.0.1:4${{n}}000 -> 8083"
exec sleep 60
"""


def _kubectl(tmp_path, monkeypatch, silent: int):
    script = tmp_path / "kubectl"
    script.write_text(KUBECTL.format(folder=tmp_path, silent=silent))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(kube_tunnel, "OPEN_TIMEOUT", 1.0)


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
                       r"\(kubectl port-forward, 3 tries of 1s\): try 1: no answer in 1s; try 2: .*try 3: "):
        kube_tunnel.local(url)
    assert (tmp_path / "starts").read_text().strip() == "3"
