"""tools/build-pulumi.sh keeps the engine it built per machine (MIRRORSTACK_CACHE,
keyed by version and the wrapper modules): a fresh clone copies it instead of
linking it again from Go's cache (measured ~25 s of a fresh clone's setup)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = ("pulumi", "pulumi-language-python", "pulumi-language-python-exec", "pulumi-resource-pulumi-python")


def build(cache: Path, bin_dir: Path, tmp_path: Path, version: str = "9.9.9") -> subprocess.CompletedProcess:
    # PATH without Go nor any pulumi: only the cache can provide the engine
    return subprocess.run(["bash", str(ROOT / "tools" / "build-pulumi.sh"), version, str(bin_dir),
                           str(tmp_path / "build")], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "MIRRORSTACK_CACHE": str(cache)})


def test_a_cached_engine_is_copied_without_go_and_another_version_is_not_taken(tmp_path):
    cache = tmp_path / "cache"
    done = build(cache, tmp_path / "first", tmp_path)
    assert done.returncode != 0 and "Go not found" in done.stderr  # nothing cached: it would build
    assert not list(cache.glob("pulumi-*"))  # and a failed build caches nothing
    folder = cache / f"pulumi-9.9.9-{_key()}"  # what a build of 9.9.9 leaves
    folder.mkdir(parents=True)
    for name in FILES:
        (folder / name).write_text(f"#!/bin/sh\necho {name}\n")
        os.chmod(folder / name, 0o755)
    done = build(cache, tmp_path / "second", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"cached in {folder}" in done.stdout
    assert sorted(p.name for p in (tmp_path / "second").iterdir()) == sorted(FILES)
    assert os.access(tmp_path / "second" / "pulumi", os.X_OK)
    assert build(cache, tmp_path / "third", tmp_path, version="9.9.8").returncode != 0  # keyed by version


def _key() -> str:
    """The cache key as the script computes it (its own text and the wrapper modules)."""
    import hashlib
    here = ROOT / "tools"
    parts = [here / "build-pulumi.sh", *sorted(here.glob("pulumi/*/go.mod")), *sorted(here.glob("pulumi/*/tools.go"))]
    return hashlib.sha256(b"".join(p.read_bytes() for p in parts)).hexdigest()[:12]
