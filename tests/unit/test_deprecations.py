"""The one table of deprecations: each old name still resolves, each entry
says when it can go."""
import pickle

import pytest
from pulumi.dynamic import ResourceProvider

from components.model.deprecations import DEPRECATIONS

PICKLED = [d for d in DEPRECATIONS if d.kind == "pickled"]


@pytest.mark.parametrize("entry", PICKLED, ids=lambda d: d.old)
def test_a_provider_pickled_under_its_old_path_unpickles_to_the_class_of_today(entry):
    module, _, name = entry.old.rpartition(".")
    # what dill wrote for a class pickled by reference, in the oldest protocol's text form
    loaded = pickle.loads(f"c{module}\n{name}\n.".encode())
    new_module, _, new_name = entry.new.rpartition(".")
    assert issubclass(loaded, ResourceProvider)
    assert (loaded.__module__, loaded.__qualname__) == (new_module, new_name)


def test_every_deprecation_names_its_kind_and_the_condition_for_removing_it():
    assert DEPRECATIONS
    for entry in DEPRECATIONS:
        assert entry.kind in ("key", "pickled") and entry.old != entry.new and entry.remove_when.strip(), entry


def test_an_unknown_name_of_a_package_is_still_an_attribute_error():
    import components.mirror
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        components.mirror.Nope  # noqa: B018
