"""A flow exists in one shape: mirrorstack.mm2.flows.FlowDescription. Outside
components/mm2/ no code builds a flow as a dict (a dict display or dict() call
with its source, target and another of its fields), keeps a list of its field
names to build one (the old flow specs), or reads one by its field names
(`spec["replication_policy"]`, `flow.get("topics_exclude")`). Read by ast, so
comments and docs do not count."""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VOCABULARY = ROOT / "components" / "mm2"
# The description's fields (checked against the dataclass below).
FIELDS = {"name", "source", "target", "topics", "topics_exclude", "groups", "groups_exclude",
          "replication_policy", "separator", "sync_topic_configs", "checkpoints", "compression", "exactly_once",
          "heartbeats", "sync_group_offsets", "sync_topic_acls", "config_sync_seconds", "tasks_max", "refresh_seconds",
          "throughput", "overrides", "connector_names", "take_over"}
# Fields no other dict of mirrorstack has a key of: reading one by name reads a flow dict.
FLOW_ONLY = {"topics_exclude", "groups_exclude", "replication_policy", "sync_topic_configs"}
# (file, function): the validation job's own hand-written input (spark/README.md, its flat
# form, which a running stack's old config also has), read field by field into a FlowDescription.
READERS = {("spark/config.py", "_flat_description")}


def _keys(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Dict):
        return {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return {k.arg for k in node.keywords if k.arg}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def _key_read(node: ast.AST) -> str | None:
    """The constant key of `x["k"]` or `x.get("k")`."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value if isinstance(node.slice.value, str) else None
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and node.args and isinstance(node.args[0], ast.Constant)):
        return node.args[0].value if isinstance(node.args[0].value, str) else None
    return None


def second_shapes(path: Path, relative: str) -> list[str]:
    """Every place in one module that builds, lists or reads a flow as a dict."""
    tree = ast.parse(path.read_text(), str(path))
    found = []

    def visit(node: ast.AST, function: str | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        allowed = (relative, function) in READERS
        where = f"{relative}:{getattr(node, 'lineno', '?')}"
        keys = _keys(node)
        if {"source", "target"} <= keys and keys & (FIELDS - {"name", "source", "target"}) and not allowed:
            found.append(f"{where}: a flow as a dict or a list of its fields ({', '.join(sorted(keys & FIELDS))})")
        if isinstance(node, ast.ClassDef) and any(getattr(b, "id", getattr(b, "attr", "")) == "TypedDict"
                                                  for b in node.bases):
            fields = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
            if {"source", "target"} <= fields:
                found.append(f"{where}: a TypedDict of a flow ({node.name})")
        if (key := _key_read(node)) in FLOW_ONLY and not allowed:
            found.append(f"{where}: a flow read as a dict ({key!r})")
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, None)
    return found


def test_no_code_outside_the_vocabulary_builds_or_reads_a_flow_as_a_dict():
    found = []
    for folder in ("components", "spark"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if VOCABULARY not in path.parents:
                found += second_shapes(path, str(path.relative_to(ROOT)))
    assert found == [], "a second shape of a flow (use mirrorstack.mm2.flows.FlowDescription):\n" + "\n".join(found)


def test_the_scan_knows_the_descriptions_fields_and_finds_each_kind_of_second_shape(tmp_path):
    from mirrorstack.mm2.flows import FlowDescription
    assert {f.name for f in dataclasses.fields(FlowDescription)} == FIELDS
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TypedDict\n"
        "SPEC = {'source': 'us', 'target': 'central', 'topics': ['.*']}\n"
        "KEYS = ('source', 'target', 'separator')\n"
        "class Piece(TypedDict):\n    source: str\n    target: str\n"
        "def f(spec):\n    return spec['replication_policy'], spec.get('topics_exclude')\n"
        "def g(x):\n    return dict(source=1, target=2, groups=[]), {'source': 1, 'target': 2, 'name': 'n'}\n")
    found = [line.split(": ", 1)[1] for line in second_shapes(module, "m.py")]
    assert found == ["a flow as a dict or a list of its fields (source, target, topics)",
                     "a flow as a dict or a list of its fields (separator, source, target)",
                     "a TypedDict of a flow (Piece)",
                     "a flow read as a dict ('replication_policy')",
                     "a flow read as a dict ('topics_exclude')",
                     "a flow as a dict or a list of its fields (groups, source, target)"]


def test_a_flow_crosses_as_json_and_comes_back_the_same():
    import json

    import pytest

    from mirrorstack.mm2.flows import FlowDescription
    from mirrorstack.model.spec import load_topology
    (flow,) = load_topology({"clusters": {"us": {}, "central": {}}, "flows": [{
        "source": "us", "target": "central", "topics": ["orders.*"], "topics_exclude": ["orders-tmp"],
        "groups": ["billing"], "groups_exclude": ["batch"], "replication_policy": "identity", "separator": "_",
        "sync_topic_configs": False, "checkpoints": False, "exactly_once": True,
        "throughput": {"compression": "lz4"}}]}).flows
    described = flow.description()
    assert described.to_dict() == {
        "name": "us->central", "source": "us", "target": "central", "topics": ["orders.*"],
        "topics_exclude": ["orders-tmp"], "groups": ["billing"], "groups_exclude": ["batch"],
        "replication_policy": "identity", "separator": "_", "sync_topic_configs": False, "checkpoints": False,
        "compression": "lz4", "exactly_once": True}
    assert FlowDescription.from_dict(json.loads(json.dumps(described.to_dict()))) == described
    assert FlowDescription.from_dict(described.to_dict(named=False), "us->central") == described
    assert flow.selection() == described.selection() and described.selection().remote("orders") == "orders"
    with pytest.raises(ValueError, match="unknown field.* policy"):
        FlowDescription.from_dict({**described.to_dict(), "policy": "identity"})
    with pytest.raises(ValueError, match="checkpoints: must be true or false"):
        FlowDescription.from_dict({**described.to_dict(), "checkpoints": "yes"})
