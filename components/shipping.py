"""The control plane's pure modules as source files, for a container that runs
one of them (the failover switch's Job, a Connect group's supervisor). Their
packages' own __init__ modules (the model, pulumi) stay behind: each parent
package is an empty one there."""
from __future__ import annotations

import importlib.util
from pathlib import Path


def module_sources(modules) -> dict[str, bytes]:
    """Relative path → bytes of each module (e.g. mirrorstack/connect/api.py),
    with an empty __init__.py for every package above them."""
    files = {}
    for name in modules:
        parts = name.split(".")
        for depth in range(1, len(parts)):
            files.setdefault("/".join(parts[:depth]) + "/__init__.py", b"")
        files[f"{'/'.join(parts)}.py"] = Path(importlib.util.find_spec(name).origin).read_bytes()
    return files
