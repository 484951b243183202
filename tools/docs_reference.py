"""The docs site's reference pages, generated at build time and never committed:
an MkDocs hook (`hooks:` in mkdocs.yml) adds them to the site on every build.

- reference/components.md: every components Args dataclass, field by field, from
  the descriptions the fields carry (mirrorstack.described);
- reference/topology.md: the stack file's format, from its JSON Schema
  (components/schema/topology.schema.json, which a unit test keeps current with
  components/model/spec.py).
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "components" / "schema" / "topology.schema.json"
PAGES = {"reference/components.md": "components_page", "reference/topology.md": "topology_page"}
GENERATED = "*Generated when the site is built from {source}: edit that, not this page.*"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        return f"`{field.default!r}`"
    if field.default_factory is not dataclasses.MISSING:
        return f"`{field.default_factory.__name__}()`"
    return "required"


def components_page() -> str:
    if str(ROOT) not in sys.path:  # mkdocs loads hooks by path; the components package is at the root
        sys.path.insert(0, str(ROOT))
    from mirrorstack.described import args_classes, descriptions

    lines = ["# Components reference", "",
             GENERATED.format(source="the `described(...)` fields of each Args dataclass (`mirrorstack.described`)"),
             "", "Each component takes `(name, args, opts=None)`; `args` is its Args below "
             "([Library use and components](../library.md)).", ""]
    for name, cls in sorted(args_classes().items()):
        texts = descriptions(cls)
        lines += [f"## {name}", "", f"`{cls.__module__}.{name}`", "",
                  "| field | type | default | description |", "|---|---|---|---|"]
        lines += [f"| `{f.name}` | `{_cell(f.type)}` | {_cell(_default(f))} | {_cell(texts[f.name])} |"
                  for f in dataclasses.fields(cls)]
        lines.append("")
    return "\n".join(lines)


def _type(prop: dict) -> str:
    """A JSON Schema property's type in words, definitions linked."""
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in prop:
        return " or ".join(_type(option) for option in prop["anyOf"])
    if "enum" in prop:
        return " or ".join(f"`{json.dumps(value)}`" for value in prop["enum"])
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"map of {_type(prop['additionalProperties'])}"
    return kind


def _properties(definition: dict) -> list[str]:
    required = set(definition.get("required", []))
    rows = ["| field | type | default | description |", "|---|---|---|---|"]
    for key, prop in definition.get("properties", {}).items():
        default = "required" if key in required else (
            f"`{json.dumps(prop['default'])}`" if "default" in prop else "")
        rows.append(f"| `{key}` | {_cell(_type(prop))} | {_cell(default)} | {_cell(prop.get('description', ''))} |")
    return rows


def topology_page(schema_path: Path = SCHEMA) -> str:
    schema = json.loads(schema_path.read_text())
    lines = ["# Topology reference", "",
             GENERATED.format(source="`components/schema/topology.schema.json` (`make schema`, from "
                                     "`components/model/spec.py`)"),
             "", _cell(schema.get("description", "")), "",
             "The [topology model](../guides/topology-model.md) "
             "explains it with examples.", "", "## Topology", ""] + _properties(schema) + [""]
    for name, definition in sorted(schema.get("$defs", {}).items()):
        lines += [f"## {name}", "", _cell(definition.get("description", "")), ""] + _properties(definition) + [""]
    return "\n".join(lines)


def on_files(files, config):
    """MkDocs hook: add the generated pages to the site."""
    from mkdocs.structure.files import File

    for uri, render in PAGES.items():
        files.append(File.generated(config, uri, content=globals()[render]()))
    return files
