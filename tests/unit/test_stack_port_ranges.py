"""Test stacks open at once never share a port range (tests/support/stacks.py),
within one test process and across pytest-xdist workers."""
import pytest

from mirrorstack.platforms.base import PORT_SPAN
from tests.support.stacks import _BASES, port_base, worker_bases


def test_stacks_in_a_row_get_different_ranges_below_the_ephemeral_ports():
    width = len(_BASES)  # 5 outside xdist, 3 and 2 on two workers
    bases = [port_base() for _ in range(3 * width + 1)]  # more than three rounds: the round boundaries too
    for i in range(len(bases) - width + 1):
        assert len(set(bases[i:i + width])) == width, bases
    assert all(5000 <= b and b + PORT_SPAN <= 32768 for b in bases)


@pytest.mark.parametrize("workers", [2, 3, 4, 5])
def test_xdist_workers_never_share_a_range_and_together_use_all(workers):
    shares = [worker_bases(f"gw{k}", workers) for k in range(workers)]
    assert all(shares), shares
    flat = [b for share in shares for b in share]
    assert len(flat) == len(set(flat)) == len(worker_bases(None, 1))


def test_more_workers_than_ranges_is_refused_naming_the_limit():
    with pytest.raises(RuntimeError, match="-n 5 or fewer"):
        worker_bases("gw0", 6)


def test_with_three_workers_the_two_that_open_stacks_side_by_side_own_two_ranges_each():
    from tests.support.scheduling import is_waiting_lane
    shares = {f"gw{k}": worker_bases(f"gw{k}", 3) for k in range(3)}
    assert {w: len(s) for w, s in shares.items() if not is_waiting_lane(w, 3)} == {"gw0": 2, "gw1": 2}


def test_the_test_clusters_loopback_ports_are_in_no_stack_range_and_never_handed_out(monkeypatch):
    """The cluster's components on 127.0.0.1 (etcd, kubelet and kube-proxy health, the controller
    manager, the scheduler) would otherwise meet a stack whose range holds Kubernetes' defaults
    (10248-10259) while the cluster runs: its service fails on "port already in use"."""
    import json
    import re

    from tests.support import ports
    from tools.kube import configs, layout
    monkeypatch.setattr(layout, "binary", lambda name: name)  # the argv only, nothing run
    argv = " ".join(configs.etcd_argv() + configs.controller_manager_argv() + configs.scheduler_argv())
    bound = {int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", argv + configs.proxy_config())}
    bound |= {int(p) for p in re.findall(r"--secure-port=(\d+)", " ".join(
        configs.controller_manager_argv() + configs.scheduler_argv()))}
    bound.add(json.loads(configs.kubelet_config())["healthzPort"])
    assert bound == set(layout.LOOPBACK_PORTS), bound
    for port in bound:
        assert port not in ports.STACK_PORTS and port not in ports._ephemeral() and port not in ports._PORTS
