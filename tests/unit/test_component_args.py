"""Every public component takes one typed Args dataclass whose fields are all
documented (mirrorstack.described): reference docs and a component schema are
generated from them. The Args classes and the components are found by walking
the `components` package, so a new one is covered without touching this test."""
from __future__ import annotations

import dataclasses
import inspect
import typing

import pulumi
import pytest
from pulumi.dynamic import Resource as DynamicResource

from mirrorstack.described import args_classes, defined_classes, descriptions

# Dynamic resources a user builds directly; the platforms' own (LocalService, …) are internal.
PUBLIC_DYNAMIC = {"FailoverSwitch", "ClusterCertificates", "GeneratedPassword"}

ARGS = args_classes()
COMPONENTS = defined_classes(lambda cls: (issubclass(cls, pulumi.ComponentResource) or (
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
