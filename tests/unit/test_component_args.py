"""Every public component takes one typed Args dataclass whose fields are all
documented (components.described): reference docs and a component schema are
generated from them. The Args classes and the components are found by walking
the `components` package, so a new one is covered without touching this test."""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import typing

import pulumi
import pytest
from pulumi.dynamic import Resource as DynamicResource

import components
from components.described import descriptions

# The Spark job's files (components/jobs) are not the control plane's modules.
SKIPPED = ("components.jobs",)
# Dynamic resources a user builds directly; the platforms' own (LocalService, …) are internal.
PUBLIC_DYNAMIC = {"FailoverSwitch", "ClusterCertificates", "GeneratedPassword"}


def _modules():
    for info in pkgutil.walk_packages(components.__path__, "components."):
        if not info.name.startswith(SKIPPED):
            yield importlib.import_module(info.name)


def _defined(predicate) -> dict[str, type]:
    """name → class, for the classes defined (not imported) in a components module."""
    return {cls.__name__: cls for module in _modules() for _, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__ and predicate(cls)}


ARGS = _defined(lambda cls: cls.__name__.endswith("Args") and dataclasses.is_dataclass(cls))
COMPONENTS = _defined(lambda cls: (issubclass(cls, pulumi.ComponentResource) or (
    issubclass(cls, DynamicResource) and cls.__name__ in PUBLIC_DYNAMIC)) and not cls.__name__.startswith("_"))


def test_the_walk_finds_every_component_and_its_args():
    assert {"KafkaCluster", "ConnectCluster", "MirrorMaker2", "SparkValidationJob", "Prometheus", "Grafana",
            "Monitoring", "ReplicationTopology", *PUBLIC_DYNAMIC} <= COMPONENTS.keys()
    assert {f"{name}Args" for name in COMPONENTS} <= ARGS.keys()


@pytest.mark.parametrize("name", sorted(ARGS))
def test_every_args_field_has_a_description(name):
    undocumented = [field for field, text in descriptions(ARGS[name]).items() if not text.strip()]
    assert not undocumented, f"{name}: fields without a description: {undocumented}"


@pytest.mark.parametrize("name", sorted(ARGS))
def test_args_are_keyword_only_and_frozen(name):
    params = dataclasses.fields(ARGS[name])
    assert all(f.kw_only for f in params), name
    assert ARGS[name].__dataclass_params__.frozen, name


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_every_public_component_takes_name_args_opts(name):
    """pulumi-eks style: Component(name, args: ComponentArgs, opts=None)."""
    params = list(inspect.signature(COMPONENTS[name].__init__).parameters.values())[1:]
    assert [p.name for p in params] == ["name", "args", "opts"] or \
        [p.name for p in params] == ["alias", "args", "opts"], (name, params)
    assert typing.get_type_hints(COMPONENTS[name].__init__)["args"] is ARGS[f"{name}Args"], name
    assert params[2].default is None, name
