"""The validation job as a package (spark/) and its zip
(components/validation/package.py): the job never imports the control plane,
what the control plane shares with it (the MM2 vocabulary, components/mm2/) is
standard library only, and the zip is the same bytes for the same tree and
runs on its own."""
from __future__ import annotations

import ast
import io
import subprocess
import sys
import zipfile

from pathlib import Path

from mirrorstack import mm2
from mirrorstack.validation.package import ENTRY_SCRIPT, PACKAGE_DIR, ZIP_NAME, job_package, job_zip

# What the control plane shares with the job: standard library only.
MM2_DIR = Path(mm2.__file__).parent
SHARED = tuple(sorted(p.stem for p in MM2_DIR.glob("*.py") if p.stem != "__init__"))


def _imports(module: str, package_dir: Path = PACKAGE_DIR) -> list[tuple[int, str]]:
    """(level, name) of every import in <package_dir>/<module>.py (level > 0: relative)."""
    tree = ast.parse((package_dir / f"{module}.py").read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(0, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
    return found


def test_the_job_never_imports_the_control_plane_and_its_modules_import_each_other_relatively():
    modules = sorted(p.stem for p in PACKAGE_DIR.glob("*.py") if p != ENTRY_SCRIPT and p.stem != "__init__")
    for module in modules:
        for level, name in _imports(module):
            top = name.split(".")[0]
            shared = name.startswith("mirrorstack.mm2.") and name.split(".")[2] in SHARED  # the vocabulary only
            assert (shared or top not in ("mirrorstack", "components")) and level <= 1, \
                f"{module} imports {'.' * level}{name}"
            assert level > 0 or top not in modules, f"{module} imports {name} by its bare name"


def test_what_the_control_plane_shares_with_the_job_is_standard_library_only():
    assert {"flows", "client_settings", "records"} <= set(SHARED)
    for module in (*SHARED, "__init__"):
        for level, name in _imports(module, MM2_DIR):
            if level:
                assert name in SHARED, f"{module} imports .{name}"
            else:
                assert name.split(".")[0] in sys.stdlib_module_names | {"__future__"}, f"{module} imports {name}"


def test_the_zip_is_the_same_bytes_for_the_same_tree_sorted_with_fixed_times():
    first, second = job_zip(), job_zip()
    assert first == second
    entries = zipfile.ZipFile(io.BytesIO(first)).infolist()
    names = [e.filename for e in entries]
    assert names == sorted(names) and "mirrorstack/spark/cli.py" in names and "mirrorstack/spark/__init__.py" in names
    # the parent package is an empty one: nothing of the control plane but the vocabulary ships to Spark
    assert {f"mirrorstack/mm2/{m}.py" for m in (*SHARED, "__init__")} <= set(names)
    assert [n for n in names if not n.startswith(("mirrorstack/spark/", "mirrorstack/mm2/"))] == \
        ["mirrorstack/__init__.py"]
    assert {e.date_time for e in entries} == {(1980, 1, 1, 0, 0, 0)}
    assert job_package().sha256 == job_package().sha256


def test_the_zip_alone_carries_the_job(tmp_path):
    """On sys.path by itself (as --py-files puts it on the driver's and the
    executors'), the zip answers `--help` through the shipped main file
    (`-S`: no site-packages, so not the checkout's editable install)."""
    (tmp_path / ZIP_NAME).write_bytes(job_zip())
    shipped = tmp_path / "shipped" / ENTRY_SCRIPT.name
    shipped.parent.mkdir()
    shipped.write_text(ENTRY_SCRIPT.read_text())
    run = subprocess.run([sys.executable, "-S", str(shipped), "--help"], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(tmp_path / ZIP_NAME), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "--py-files" in run.stdout and "Pass/fail" in run.stdout
