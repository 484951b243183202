"""Documented fields for the components' Args dataclasses: each field carries
its description in `metadata["description"]`, where a reference-doc or
component-schema generator reads it (`descriptions`), and a test checks that
none is missing (tests/unit/test_component_args.py)."""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from pathlib import Path

DESCRIPTION = "description"
# Every component that runs something takes the same platform.
PLATFORM = ("the platform that runs the services (a mirrorstack.platforms.base.Platform: local, docker, kubernetes "
            "or one a package registers; mirrorstack.platforms.make_platform builds one)")


def described(description: str, **field_options):
    """A dataclass field documented by `description` (`default=` or
    `default_factory=` as for `dataclasses.field`)."""
    return dataclasses.field(metadata={DESCRIPTION: description}, **field_options)


def descriptions(args_class) -> dict[str, str]:
    """field name → description ("" when a field has none) of an Args dataclass."""
    return {f.name: f.metadata.get(DESCRIPTION, "") for f in dataclasses.fields(args_class)}


# The Spark job's files (components/jobs) are not the control plane's modules.
SKIPPED = ("mirrorstack.jobs",)


def defined_classes(predicate) -> dict[str, type]:
    """name → class, for the classes defined (not imported) in a module of the
    `components` package that satisfy `predicate`. Walking the package means a
    new component is found without being listed anywhere (imports every module)."""
    found = {}
    for info in pkgutil.walk_packages([str(Path(__file__).parent)], "components."):
        if info.name.startswith(SKIPPED):
            continue
        module = importlib.import_module(info.name)
        found |= {cls.__name__: cls for _, cls in inspect.getmembers(module, inspect.isclass)
                  if cls.__module__ == module.__name__ and predicate(cls)}
    return found


def args_classes() -> dict[str, type]:
    """name → class of every components Args dataclass."""
    return defined_classes(lambda cls: cls.__name__.endswith("Args") and dataclasses.is_dataclass(cls))
