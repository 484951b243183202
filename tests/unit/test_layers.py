"""The import contracts of pyproject.toml ([tool.importlinter]) hold, and each
one fails when broken: lint-imports (import-linter) over the package laid out
as the wheel holds it, spark/ as mirrorstack/spark (the editable install maps
the two folders into one package, which import-linter's graph cannot follow).
And no two folders of the package import each other (function-level imports
too, which a contract per pair would not list)."""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTRACTS = {c["id"]: c["name"] for c in
             tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]}
# One import each contract forbids, added to a copy of the tree.
BREAKS = {
    "mm2": ("mirrorstack/mm2/flows.py", "import mirrorstack.naming"),
    "model": ("mirrorstack/model/spec.py", "from mirrorstack.mirror import connectors"),
    "plan": ("mirrorstack/plan/rename_check.py", "from mirrorstack.mirror import connectors"),
    "spark": ("mirrorstack/spark/config.py", "from mirrorstack.model import spec"),
    "platforms": ("mirrorstack/platforms/containers.py", "from mirrorstack.kafka import security"),
    "monitoring": ("mirrorstack/monitoring/args.py", "from mirrorstack.kafka.cluster import KafkaCluster"),
    "platform-packages": ("mirrorstack/platforms/docker/platform.py", "from mirrorstack.platforms.kubernetes import pods"),
}


def laid_out(tmp_path: Path) -> Path:
    """A folder holding the package as the wheel does: components/ as mirrorstack, spark/ inside it."""
    site = tmp_path / "site"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "components", site / "mirrorstack", ignore=ignore)
    shutil.copytree(ROOT / "spark", site / "mirrorstack" / "spark", ignore=ignore)
    return site


def lint_imports(site: Path) -> subprocess.CompletedProcess:
    """lint-imports with the repo's contracts, `mirrorstack` imported from `site` (first on sys.path)."""
    return subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()",
         "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=site, capture_output=True, text=True, timeout=300,
        # wide: a contract's name on one line, as the asserts look for it
        env={**os.environ, "PYTHONPATH": str(site), "COLUMNS": "500", "NO_COLOR": "1"})


def test_every_contract_is_kept(tmp_path):
    run = lint_imports(laid_out(tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in run.stdout, run.stdout
    assert set(BREAKS) == set(CONTRACTS)  # each contract below is shown to bite


@pytest.mark.parametrize("contract", sorted(BREAKS))
def test_each_contract_fails_when_broken(tmp_path, contract):
    site = laid_out(tmp_path)
    path, line = BREAKS[contract]
    module = site / path
    module.write_text(module.read_text() + f"\n{line}  # broken on purpose\n")
    run = lint_imports(site)
    assert run.returncode != 0
    assert f"{CONTRACTS[contract]} BROKEN" in run.stdout, run.stdout
    broken = [name for name in CONTRACTS.values() if f"{name} BROKEN" in run.stdout]
    assert broken == [CONTRACTS[contract]], run.stdout  # that one contract, no other


# ---------------------------------------------------------------- one direction between folders

def unit_of(path: Path, root: Path) -> str:
    """The folder (or top-level module, e.g. toolchain) a file of the package belongs to."""
    parts = path.relative_to(root).with_suffix("").parts
    return "spark" if root.name == "spark" else parts[0]


def imported_units(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, folder or top-level module) of each `mirrorstack.*` import, at any depth."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names] if node.module == "mirrorstack" else [node.module]
        else:
            continue  # relative imports stay in their folder
        found += [(node.lineno, name.split(".")[1]) for name in names
                  if name.startswith("mirrorstack.") and len(name.split(".")) > 1]
    return found


def folder_edges(repo: Path) -> dict[tuple[str, str], list[str]]:
    """(importer, imported) → where, between folders of components/ and spark/."""
    edges: dict[tuple[str, str], list[str]] = {}
    for root in (repo / "components", repo / "spark"):
        for path in sorted(root.rglob("*.py")):
            source = unit_of(path, root)
            for line, target in imported_units(ast.parse(path.read_text(), str(path))):
                if target != source:
                    edges.setdefault((source, target), []).append(f"{path.relative_to(repo)}:{line}")
    return edges


def test_no_two_folders_import_each_other():
    edges = folder_edges(ROOT)
    mutual = {f"{a} <-> {b}": edges[a, b] + edges[b, a] for a, b in edges if a < b and (b, a) in edges}
    assert not mutual, "folders that import each other (pick one direction):\n" + "\n".join(
        f"  {pair}: {', '.join(where)}" for pair, where in sorted(mutual.items()))


BUILT_IN_NAMES = re.compile(r'''(platform|\.name)\s*(==|!=)\s*["'](local|docker|kubernetes)["']''')


def test_what_a_platform_can_do_is_asked_never_its_name():
    """Capabilities (model/capabilities.py), not `platform.name == "local"`: a registered platform of
    a package behaves by what it declares (here: whether it serves Grafana or only writes its files)."""
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for folder in ("components", "spark") for path in sorted((ROOT / folder).rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1) if BUILT_IN_NAMES.search(line)]
    assert found == []
    from mirrorstack.model.capabilities import capabilities
    assert [name for name in ("local", "docker", "kubernetes") if capabilities(name).serves_grafana] == [
        "docker", "kubernetes"]
