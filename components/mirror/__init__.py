"""MirrorMaker 2: the connector trio built from a flow (connectors), its
reconciliation through the Connect client (reconcile), what the preview says
(preview), the dynamic provider (provider), the resource and component (resource)."""
from mirrorstack.model.deprecations import pickled_alias


def __getattr__(name: str):  # old stacks' pickled providers: components/model/deprecations.py
    return pickled_alias(__name__, name)
