"""Certificates: the TLS material (pure), its lifecycle (rotation as a state machine), the dynamic resource that keeps it."""
from mirrorstack.model.deprecations import pickled_alias


def __getattr__(name: str):  # old stacks' pickled providers: components/model/deprecations.py
    return pickled_alias(__name__, name)
