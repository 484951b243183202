"""Documented fields for the components' Args dataclasses: each field carries
its description in `metadata["description"]`, where a reference-doc or
component-schema generator reads it (`descriptions`), and a test checks that
none is missing (tests/unit/test_component_args.py)."""
from __future__ import annotations

import dataclasses

DESCRIPTION = "description"
# Every component that runs something takes the same platform.
PLATFORM = ("the platform that runs the services (a components.platforms.base.Platform: local, docker or kubernetes; "
            "components.platforms.make_platform builds one)")


def described(description: str, **field_options):
    """A dataclass field documented by `description` (`default=` or
    `default_factory=` as for `dataclasses.field`)."""
    return dataclasses.field(metadata={DESCRIPTION: description}, **field_options)


def descriptions(args_class) -> dict[str, str]:
    """field name → description ("" when a field has none) of an Args dataclass."""
    return {f.name: f.metadata.get(DESCRIPTION, "") for f in dataclasses.fields(args_class)}
