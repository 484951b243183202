"""What ships into a pod or the job's zip is derived from imports
(components/shipping.py), and it is enough: each entry module, read from the
shipped files alone (modulefinder, imports inside functions too), finds every
mirrorstack module it imports among them; one that would not ship is named."""
from __future__ import annotations

import io
import modulefinder
import zipfile
from pathlib import Path

import pytest

from mirrorstack.connect import supervision
from mirrorstack.failover import elsewhere
from mirrorstack.shipping import module_sources, project_imports
from mirrorstack.validation.package import ENTRY_SCRIPT, job_zip


def _unzipped(data: bytes) -> dict[str, bytes]:
    archive = zipfile.ZipFile(io.BytesIO(data))
    return {name: archive.read(name) for name in archive.namelist()}


# (what ships, the files, the entry: a module or the job's main file)
SHIPPED = {
    "failover switch": (lambda: _unzipped(elsewhere.code_zip()), elsewhere.ENTRY),
    "supervisor": (lambda: module_sources(supervision.SHIPS), supervision.MODULE),
    "validation job": (lambda: {**_unzipped(job_zip()), "validate_replication.py": ENTRY_SCRIPT.read_bytes()},
                       "validate_replication.py"),
}


def unshipped_imports(files: dict[str, bytes], entry: str, folder: Path) -> tuple[list[str], set[str]]:
    """(mirrorstack modules `entry` imports that are not among `files`, the ones it found there)."""
    for name, content in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
    finder = modulefinder.ModuleFinder(path=[str(folder)])  # the shipped files, nothing installed
    if entry.endswith(".py"):
        finder.run_script(str(folder / entry))
    else:
        finder.run_script(str(folder / (entry.replace(".", "/") + ".py")))
        finder.modules.setdefault(entry, finder.modules.pop("__main__"))
    missing, maybe = finder.any_missing_maybe()
    return sorted(m for m in missing + maybe if m.startswith("mirrorstack")), set(finder.modules)


@pytest.mark.parametrize("what", sorted(SHIPPED))
def test_every_project_module_an_entry_imports_ships(tmp_path, what):
    files, entry = SHIPPED[what]
    missing, found = unshipped_imports(files(), entry, tmp_path)
    assert missing == [], f"{what}: {entry} imports {missing}, which would not ship"
    assert set(project_imports(ENTRY_SCRIPT if entry.endswith(".py") else entry)) <= found  # read, not skipped


def test_an_import_that_would_not_ship_is_named(tmp_path):
    files = module_sources(supervision.SHIPS)
    healing = "mirrorstack/connect/healing.py"
    files[healing] += b"\n\ndef _late():\n    from mirrorstack.model.spec import Flow  # inside a function, too\n"
    missing, _ = unshipped_imports(files, supervision.MODULE, tmp_path)
    assert missing == ["mirrorstack.model.spec"]


def test_the_lists_follow_the_imports():
    assert "mirrorstack.mm2.records" in project_imports(elsewhere.ENTRY)  # procedure decodes MM2's checkpoints
    assert not any(m.startswith("mirrorstack.spark.") for m in project_imports(elsewhere.ENTRY))
    assert "mirrorstack.connect.api" in supervision.SHIPS and "mirrorstack.platforms.kubernetes.tunnel" in supervision.SHIPS
    assert {m.rpartition(".")[0] for m in project_imports(ENTRY_SCRIPT)} == {"mirrorstack.spark", "mirrorstack.mm2"}
