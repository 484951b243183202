"""The base of every topology model class: unknown keys and loosely typed
values refused. A leaf module, so the model's sections can live in modules of
their own (kubernetes.py) beside spec.py."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    # strict: the stack file's YAML already typed every value (Pulumi hands ints
    # and bools over as such), so `"yes"` is no boolean and `"2"` no integer, as
    # the JSON Schema says; ints still pass as floats (wait_seconds: 60).
    model_config = ConfigDict(extra="forbid", strict=True)
