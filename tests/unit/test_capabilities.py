"""The model asks what a platform can do (model/capabilities.py), never which one it is."""
import ast
from pathlib import Path

import pytest

from mirrorstack.model.capabilities import BUILT_IN, capabilities, offering
from mirrorstack.model.spec import Topology

PLATFORMS = sorted(BUILT_IN)

COMPONENTS = Path(__file__).resolve().parents[2] / "components"
ASKING = [COMPONENTS / "model", COMPONENTS / "extras.py"]


def test_every_platform_the_model_accepts_has_capabilities():
    for name in PLATFORMS:
        assert "is not a registered platform" not in _refusal(name), name
        assert capabilities(name) is BUILT_IN[name].capabilities
    assert "is not a registered platform" in _refusal("nomad")


def _name_comparisons(path: Path) -> list[str]:
    """`x.platform == "..."`-like comparisons (or `in (...)` of names) in `path`."""
    found = []
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            strings = [c for c in ast.walk(node) if isinstance(c, ast.Constant) and c.value in PLATFORMS]
            names = [n for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))
                     and (getattr(n, "id", None) or getattr(n, "attr", None)) in ("platform", "name")]
            if strings and names:
                found.append(f"{path.relative_to(COMPONENTS)}:{node.lineno}")
    return found


def test_the_model_and_the_extras_never_compare_a_platform_name():
    files = [f for p in ASKING for f in ([p] if p.is_file() else sorted(p.rglob("*.py")))]
    assert [hit for f in files for hit in _name_comparisons(f)] == []


def test_the_comparison_finder_sees_one(tmp_path):
    """It would have found the five comparisons of model/rules.py before capabilities."""
    sample = COMPONENTS / "model" / "_sample_for_test.py"
    try:
        sample.write_text('def f(t):\n    return t.platform != "kubernetes"\n')
        assert _name_comparisons(sample) == ["model/_sample_for_test.py:2"]
    finally:
        sample.unlink()


def _refusal(platform: str, **extra) -> str:
    """What the model says of a small topology on `platform` ("" when it accepts it)."""
    try:
        Topology.model_validate({
            "platform": platform, "clusters": {"a": {"brokers": 1, **extra.pop("cluster", {})}, "b": {"brokers": 1}},
            "flows": [{"source": "a", "target": "b", "topics": ["orders"]}], **extra})
    except ValueError as error:
        return str(error)
    return ""


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_node_ports_follow_the_capability(platform):
    said = _refusal(platform, cluster={"node_ports": 31000})
    assert ("NodePorts exist on" in said) == (not capabilities(platform).node_ports), said
    if not capabilities(platform).node_ports:
        assert f"use platform {' or '.join(offering('node_ports'))}" in said, said


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_a_schedule_follows_the_capability(platform):
    said = _refusal(platform, validation={"schedule": "0 * * * *"})
    assert ("validation.schedule" in said) == (not capabilities(platform).scheduled_jobs), said
