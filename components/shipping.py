"""What ships into a container that runs one of mirrorstack's pure modules (the
failover switch's Job, a Connect group's supervisor, the validation job's zip):
derived from the imports of the module it runs, never a list kept by hand.
Their packages' own __init__ modules (the model, pulumi) stay behind: each
parent package is an empty one there."""
from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

from . import source_parsing

ROOT = "mirrorstack"


def _origin(name: str) -> Path:
    return Path(importlib.util.find_spec(name).origin)


@functools.cache
def _kind(name: str) -> str | None:
    """"module", "package", or None where `name` is no module (a function, a
    class). Found, not imported: only the packages above it are."""
    parent = name.rpartition(".")[0]
    if parent and _kind(parent) != "package":
        return None
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    return "package" if spec.submodule_search_locations is not None else "module"


def _imported_by(path: Path, package: str) -> set[str]:
    """The mirrorstack modules and packages the file at `path` names in an import
    (at any depth: imports inside functions count); `package`: its own, for
    relative imports."""
    found = set()
    for node in ast.walk(source_parsing.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level \
                else node.module
            for alias in node.names:  # `from package import module`, or a name of module `base`
                found.add(f"{base}.{alias.name}" if _kind(f"{base}.{alias.name}") else base)
    return {name for name in found if name.startswith(f"{ROOT}.")}


@functools.cache
def project_imports(entry: str | Path) -> tuple[str, ...]:
    """The mirrorstack modules `entry` (a module's name, or a script's path)
    needs: itself and every one it imports, directly or through another,
    sorted. Packages are not among them: they ship as empty ones."""
    if isinstance(entry, Path):
        todo, modules = _imported_by(entry, ""), set()
    else:
        todo, modules = {entry}, set()
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        seen.add(name)
        kind = _kind(name)
        if kind is None:
            raise ImportError(f"{entry} imports {name}, which is no module of {ROOT}")
        if kind == "module":  # a package ships empty: what its __init__ imports does not come along
            modules.add(name)
            todo |= _imported_by(_origin(name), name.rpartition(".")[0]) - seen
    return tuple(sorted(modules))


def module_sources(modules) -> dict[str, bytes]:
    """Relative path → bytes of each module (e.g. mirrorstack/connect/api.py),
    with an empty __init__.py for every package above them."""
    files = {}
    for name in modules:
        parts = name.split(".")
        for depth in range(1, len(parts)):
            files.setdefault("/".join(parts[:depth]) + "/__init__.py", b"")
        files[f"{'/'.join(parts)}.py"] = _origin(name).read_bytes()
    return files
