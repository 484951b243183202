"""What a flow's connectors are given besides what the flow copies: the
source connector's speed settings, raw config overrides and connector names
per kind, as the frozen values a FlowDescription holds (hashable: tuples, not
dicts), and their JSON: `plain` writes only what differs from the defaults,
`nested` reads it back (a missing key takes its default). The defaults are
the model's (mirrorstack.model.spec). Standard library only."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from .connectors import DEFAULT_MAX_RECORD_BYTES, KINDS

CONNECTOR_KINDS = tuple(KINDS)  # source, checkpoint, heartbeat


@dataclass(frozen=True)
class FlowThroughput:
    """The source connector's speed settings (the model's `throughput`, but its
    compression: the description's `compression`, which the plan checks too)."""
    batch_bytes: int = 262144
    linger_ms: int = 5
    in_flight: int = 5
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    poll_records: int = 500


@dataclass(frozen=True)
class NamesByKind:
    """A connector name per kind (source, checkpoint, heartbeat); None: none given."""
    source: str | None = None
    checkpoint: str | None = None
    heartbeat: str | None = None

    def by_kind(self) -> dict[str, str]:
        return {kind: getattr(self, kind) for kind in CONNECTOR_KINDS if getattr(self, kind) is not None}


@dataclass(frozen=True)
class OverridesByKind:
    """Raw config keys per connector kind, applied last: (key, value) pairs in
    the order given (a tuple keeps the description hashable)."""
    source: tuple[tuple[str, str], ...] = ()
    checkpoint: tuple[tuple[str, str], ...] = ()
    heartbeat: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, by_kind: Mapping[str, Mapping[str, str]]) -> OverridesByKind:
        return cls(**{kind: tuple(props.items()) for kind, props in by_kind.items()})

    def by_kind(self) -> dict[str, dict[str, str]]:
        """{kind: {key: value}} for the kinds that override anything."""
        return {kind: dict(getattr(self, kind)) for kind in CONNECTOR_KINDS if getattr(self, kind)}

    def for_kind(self, kind: str) -> dict[str, str]:
        return dict(getattr(self, kind))


# The description's fields that hold these values.
NESTED = {"throughput": FlowThroughput, "overrides": OverridesByKind, "connector_names": NamesByKind,
          "take_over": NamesByKind}


def whole_number(value: Any, where: str, *, allow_none: bool = False) -> int | None:
    """An int; a float without a fraction too (numbers in Pulumi's dynamic props come back as floats)."""
    if value is None and allow_none:
        return None
    whole = isinstance(value, int) or isinstance(value, float) and value.is_integer()
    if isinstance(value, bool) or not whole:
        raise ValueError(f"{where}: must be a whole number")
    return int(value)


def nested(key: str, value: Any) -> Any:
    """A nested field from its dict (a missing key takes its default)."""
    cls = NESTED[key]
    if not isinstance(value, Mapping):
        raise ValueError(f"{key}: must be an object")
    known = [f.name for f in fields(cls)]
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise ValueError(f"{key}: unknown field(s) {', '.join(unknown)} (known: {', '.join(known)})")
    if cls is FlowThroughput:
        return cls(**{k: whole_number(v, f"{key}.{k}") for k, v in value.items()})
    if cls is NamesByKind:
        for kind, name in value.items():
            if name is not None and (not isinstance(name, str) or not name):
                raise ValueError(f"{key}.{kind}: must be a connector name")
        return cls(**value)
    for kind, props in value.items():
        if not isinstance(props, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in props.items()):
            raise ValueError(f"{key}.{kind}: must map config keys to strings")
    return OverridesByKind.of(value)


def plain(value: Any) -> Any:
    """A field as to_dict writes it: lists for tuples, a nested one with only what differs from its default."""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, (OverridesByKind, NamesByKind)):
        return value.by_kind()
    if isinstance(value, FlowThroughput):
        return {f.name: getattr(value, f.name) for f in fields(value) if getattr(value, f.name) != f.default}
    return value
