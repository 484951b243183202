"""Failover as code: the rules (which groups and topics move, offset translation), the procedure against live clusters, the switch resource."""
from mirrorstack.model.deprecations import pickled_alias


def __getattr__(name: str):  # old stacks' pickled providers: components/model/deprecations.py
    return pickled_alias(__name__, name)
