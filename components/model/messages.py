"""The model's problems as messages: each pydantic error turned into
`<field path>: <what is wrong>; fix: <what to write>`, and the one error type
that lists them all (TopologyError). Field paths point into the stack file,
not into the flow expansion (mirrorstack.model.expansion). Pure.
"""
from __future__ import annotations

import difflib
import json
import re
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from mirrorstack.model.expansion import SHORTHAND, FlowOrigin
from mirrorstack.model.paths import field_path as _path


class TopologyError(ValueError):
    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(["Invalid mirrorstack topology:", *(f"  - {p}" for p in problems)]))


def validation_problems(error: ValidationError, root: type[BaseModel], origins: tuple[FlowOrigin, ...]) -> list[str]:
    """Every problem of a failed validation of `root`, once each, in order: the
    rules' own (a TopologyError raised inside), and pydantic's, as messages."""
    problems = []
    for err in error.errors():
        rules = err.get("ctx", {}).get("error")
        if isinstance(rules, TopologyError):
            problems += rules.problems
            continue
        loc = err["loc"]
        if loc[:1] == ("flows",) and len(loc) > 1 and isinstance(loc[1], int) and loc[1] < len(origins):
            err = {**err, "loc": origins[loc[1]].loc(loc[2:])}
        problems.append(_pydantic_problem(root, err))
    return list(dict.fromkeys(problems))


def _model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model whose keys sit at `loc` under `root`, to list them when a key is unknown."""
    node: Any = root
    for part in loc:
        if isinstance(node, type) and issubclass(node, BaseModel):
            node = node.model_fields[part].annotation if part in node.model_fields else None
        else:  # a dict key or list index: step into the value type
            node = typing.get_args(node)[-1] if typing.get_origin(node) in (dict, list) else None
        if isinstance(node, types.UnionType):  # `ExternalCluster | None`
            node = typing.get_args(node)[0]
    return node if isinstance(node, type) and issubclass(node, BaseModel) else None


def _field_at(root: type[BaseModel], loc: tuple) -> Any:
    """The FieldInfo of the model field at `loc`, if it is one."""
    model = _model_at(root, loc[:-1]) if loc else None
    return model.model_fields.get(loc[-1]) if model is not None and isinstance(loc[-1], str) else None


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _bounds(root: type[BaseModel], loc: tuple) -> str:
    """' >= 1 (at most 9)' from the field's ge/gt and le/lt, '' without bounds."""
    low = high = ""
    for constraint in getattr(_field_at(root, loc), "metadata", []):
        for op, text in (("ge", ">= {}"), ("gt", "> {}"), ("le", "at most {}"), ("lt", "below {}")):
            bound = getattr(constraint, op, None)
            if bound is not None and op in ("ge", "gt"):
                low = " " + text.format(_number(bound))
            elif bound is not None:
                high = text.format(_number(bound))
    if low:
        return f"{low} ({high})" if high else low
    return f" {high.replace('at most', '<=').replace('below', '<')}" if high else ""


def _yaml_scalar(value: Any) -> str:
    return "null" if value is None else json.dumps(value)


# What each kind of pydantic error asks for, by error type (see _type_fix).
_INT_ERRORS = {"int_type", "int_parsing", "int_from_float", "int_parsing_size"}
_FLOAT_ERRORS = {"float_type", "float_parsing", "finite_number"}
_BOOL_ERRORS = {"bool_type", "bool_parsing"}
_BOUND_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}
_TRUE, _FALSE = {"yes", "y", "on", "true", "1", "t"}, {"no", "n", "off", "false", "0", "f"}


def _type_fix(root: type[BaseModel], err: dict) -> str:
    """The `fix:` of a pydantic type or constraint error: what to write instead."""
    kind, loc, value, ctx = err["type"], err["loc"], err.get("input"), err.get("ctx") or {}
    field = _field_at(root, loc)
    if kind in _BOUND_ERRORS:  # the bound's type is the field's: ge=1 on an int, ge=0.0 on a float
        whole = not any(isinstance(v, float) for v in ctx.values())
        return f"use {'a whole number' if whole else 'a number'}{_bounds(root, loc)}"
    if kind in _INT_ERRORS | _FLOAT_ERRORS:
        whole = kind in _INT_ERRORS
        example = ""
        if isinstance(value, str) and re.fullmatch(r"-?[0-9]+" if whole else r"-?[0-9]+(\.[0-9]+)?", value.strip()):
            example = f", e.g. {value.strip()}"
        elif isinstance(value, float) and value.is_integer():
            example = f", e.g. {int(value)}"
        return f"write {'a whole number' if whole else 'a number'}{_bounds(root, loc)} without quotes{example}"
    if kind in _BOOL_ERRORS:
        word = str(value).strip().lower() if isinstance(value, (str, int)) else ""
        example = ", e.g. true" if word in _TRUE else ", e.g. false" if word in _FALSE else ""
        return f"write true or false without quotes{example}"
    if kind == "list_type":
        if isinstance(value, str):
            items = ", ".join(json.dumps(x.strip()) for x in value.split(",") if x.strip()) or '""'
            return f"write a YAML list like [a, b], e.g. [{items}]"
        return "write a YAML list like [a, b]"
    if kind == "string_type":
        if isinstance(value, (bool, int, float)):
            return f'quote it in YAML, e.g. "{_yaml_scalar(value)}"'
        if value is None:
            return 'write a value, e.g. "text", or remove the key for the default'
        return 'write a single string, e.g. "text"'
    if kind == "string_pattern_mismatch":
        examples = getattr(field, "examples", None) or []
        default = getattr(field, "default", None)
        example = examples[0] if examples else default if isinstance(default, str) and default else None
        return f"match the pattern {ctx.get('pattern')}" + (f", e.g. {example!r}" if example else "")
    if kind == "string_too_short":
        default = getattr(field, "default", None)
        example = f", e.g. {default!r}" if isinstance(default, str) and default else ""
        count = ctx.get("min_length", 1)
        return f"write a non-empty value{example}" if count == 1 else f"write at least {count} characters{example}"
    if kind == "string_too_long":
        return f"write at most {ctx.get('max_length')} characters"
    if kind == "too_short":
        count = ctx.get("min_length", 1)
        return f"add at least {count} {'entry' if count == 1 else 'entries'}"
    if kind == "literal_error":
        expected = str(ctx.get("expected", ""))
        head, sep, last = expected.rpartition(" or ")
        choices = f"{head}, {last}" if sep else expected
        cased = [c for c in re.findall(r"'([^']*)'", expected) if isinstance(value, str) and c.lower() == value.lower()]
        return f"use one of {choices}" + (f" (case matters: {cased[0]!r})" if cased else "")
    if kind in ("model_type", "model_attributes_type"):
        model = _model_at(root, loc)
        if model is None:
            return "write a YAML mapping like {key: value}"
        required = [name for name, f in model.model_fields.items() if f.is_required()]
        if required:
            return f"write a YAML mapping with at least the keys {', '.join(required)}"
        return f"write a YAML mapping of {', '.join(sorted(model.model_fields))}, or {{}} for the defaults"
    if kind in ("dict_type", "mapping_type"):
        return 'write a YAML mapping like {key: "value"}, or {} for none'
    return "correct the value as the JSON Schema (components/schema/topology.schema.json) says"


def _pydantic_problem(root: type[BaseModel], err: dict) -> str:
    """One pydantic error as `<field path>: <what is wrong>; fix: <what to write>`."""
    where, kind, msg = _path(err["loc"]), err["type"], err["msg"].removeprefix("Value error, ")
    if kind == "extra_forbidden":
        model = _model_at(root, err["loc"][:-1])
        allowed = sorted(model.model_fields if model else {})
        close = difflib.get_close_matches(str(err["loc"][-1]), allowed, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"{where}: unknown key; fix: {hint}allowed keys here are {', '.join(allowed) or 'none'}"
    if kind == "missing":
        many = {one: many for many, one in SHORTHAND.items()}.get(err["loc"][-1])
        if many and len(err["loc"]) == 3 and err["loc"][0] == "flows":
            return f"{where}: required; fix: add it, or `{many}: [...]` for several clusters"
        return f"{where}: required; fix: add it"
    if kind not in ("quote_value", "value_error") and not isinstance(err.get("input"), (dict, list)):
        msg += f" (got {err.get('input')!r})"
    if "fix:" not in msg:  # pydantic's own type and constraint errors say what, not how
        msg += f"; fix: {_type_fix(root, err)}"
    return f"{where}: {msg}"
