"""MirrorMaker 2: the connector trio built from a flow, its reconciliation through Connect's REST API, the dynamic resource."""
from components.model.deprecations import pickled_alias


def __getattr__(name: str):  # old stacks' pickled providers: components/model/deprecations.py
    return pickled_alias(__name__, name)
