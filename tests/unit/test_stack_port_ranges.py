"""Test stacks open at once never share a port range (tests/support/stacks.py),
within one test process and across pytest-xdist workers."""
import pytest

from mirrorstack.platforms.base import PORT_SPAN
from tests.support.stacks import _BASES, port_base, worker_bases


def test_stacks_in_a_row_get_different_ranges_below_the_ephemeral_ports():
    width = len(_BASES)  # 4 outside xdist, 2 on each of two workers
    bases = [port_base() for _ in range(3 * width + 1)]  # more than three rounds: the round boundaries too
    for i in range(len(bases) - width + 1):
        assert len(set(bases[i:i + width])) == width, bases
    assert all(10000 <= b and b + PORT_SPAN <= 32768 for b in bases)


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_xdist_workers_never_share_a_range_and_together_use_all(workers):
    shares = [worker_bases(f"gw{k}", workers) for k in range(workers)]
    assert all(shares), shares
    flat = [b for share in shares for b in share]
    assert len(flat) == len(set(flat)) == len(worker_bases(None, 1))


def test_more_workers_than_ranges_is_refused_naming_the_limit():
    with pytest.raises(RuntimeError, match="-n 4 or fewer"):
        worker_bases("gw0", 5)
