"""Test stacks open at once never share a port range (tests/support/stacks.py)."""
from components.platforms.local.platform import PORT_SPAN
from tests.support.stacks import _port_base


def test_any_four_stacks_in_a_row_get_different_ranges_below_the_ephemeral_ports():
    bases = [_port_base() for _ in range(13)]  # more than three rounds: the round boundaries too
    for i in range(len(bases) - 3):
        assert len(set(bases[i:i + 4])) == 4, bases
    assert all(10000 <= b and b + PORT_SPAN <= 32768 for b in bases)
