"""The one table of deprecations: each old name still resolves, each entry
says when it can go."""
import pickle

import pytest
from pulumi.dynamic import ResourceProvider

from mirrorstack.model.deprecations import DEPRECATIONS

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
        assert entry.kind in ("import", "key", "pickled") and entry.old != entry.new and entry.remove_when.strip(), entry


def test_an_unknown_name_of_a_package_is_still_an_attribute_error():
    import mirrorstack.mirror
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        mirrorstack.mirror.Nope  # noqa: B018


def test_every_renamed_key_is_accepted_and_warned_about_from_the_table():
    from mirrorstack.model.spec import load_topology
    keys = [d for d in DEPRECATIONS if d.kind == "key"]
    topology = load_topology({
        "clusters": {"a": {}, "b": {}}, "flows": [{"source": "a", "target": "b"}],
        "connect": {"b": {"kafka": "b", "remote_target": False}}, "validation": {"image": "example/spark:1"}})
    assert {d.old for d in keys} == {"remote_target", "validation.image"}
    assert sorted(topology.warnings) == sorted(
        f"mirrorstack:topology: `{d.old}` is deprecated; fix: rename it to `{d.new}` (same meaning)" for d in keys)
    assert topology.images.spark == "example/spark:1" and topology.connect["b"].push is False
