"""Where kubernetes/rollout.py lived before each platform became a package: stacks
deployed before hold its provider pickled under this module's name (dill
pickles a class by module path), and unpickle it from here."""
from mirrorstack.model.deprecations import pickled_alias


def __getattr__(name: str):  # old stacks' pickled providers: components/model/deprecations.py
    return pickled_alias(__name__, name)
