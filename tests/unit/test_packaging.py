"""pyproject.toml and the lock (requirements.txt) hold together: every range
has exactly one pin and the pin is inside it; the wheel's package list is the
tree's; the old import name resolves to the same modules as the new one."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def lock() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version and canonicalize_name(name) not in pins, f"requirements.txt: {line!r} (one exact pin per package)"
            pins[canonicalize_name(name)] = version
    return pins


def ranges() -> list[Requirement]:
    declared = [Requirement(r) for r in PROJECT["dependencies"]]
    for extra in PROJECT["optional-dependencies"].values():
        declared += [r for r in map(Requirement, extra) if canonicalize_name(r.name) != "mirrorstack"]
    return declared


def test_every_range_has_a_pin_in_the_lock_and_the_pin_is_inside_it():
    pins = lock()
    for requirement in ranges():
        assert requirement.specifier, f"{requirement.name}: a range, not a bare name"
        pin = pins.get(canonicalize_name(requirement.name))
        assert pin is not None, f"{requirement.name} has no pin in requirements.txt: make lock"
        assert requirement.specifier.contains(pin, prereleases=True), f"{requirement.name}=={pin} not in {requirement.specifier}"


def test_runtime_ranges_stop_before_the_next_major_where_the_project_follows_semver():
    for requirement in map(Requirement, PROJECT["dependencies"]):
        if canonicalize_name(requirement.name) in ("grafana-foundation-sdk", "cryptography"):
            continue  # build-date epochs; cryptography's major moves every release (no API break implied)
        assert any(spec.operator == "<" for spec in requirement.specifier), requirement


def test_the_extras_are_the_documented_ones():
    assert set(PROJECT["optional-dependencies"]) == {"spark", "docker", "kubernetes", "tests", "docs"}
    from mirrorstack.extras import EXTRAS
    for extra, (module, _) in EXTRAS.items():  # each checked extra brings the module the check looks for
        names = {canonicalize_name(Requirement(r).name) for r in PROJECT["optional-dependencies"][extra]}
        assert canonicalize_name(module.replace("_", "-")) in names, (extra, module)


def test_the_wheel_lists_every_package_of_the_tree_under_the_import_name():
    tree = {"mirrorstack." + ".".join(p.parent.relative_to(ROOT / "components").parts)
            for p in (ROOT / "components").rglob("__init__.py")}
    tree = {name.rstrip(".") for name in tree} | {"mirrorstack.spark"}
    assert set(SETUPTOOLS["packages"]) == tree
    assert SETUPTOOLS["package-dir"] == {"mirrorstack": "components", "mirrorstack.spark": "spark"}


def test_the_makefile_reads_the_engine_and_spark_versions_from_the_lock():
    makefile = (ROOT / "Makefile").read_text()
    assert "sed -n 's/^pulumi==//p' requirements.txt" in makefile
    assert "sed -n 's/^pyspark==//p' requirements.txt" in makefile
    assert {"pulumi", "pyspark"} <= lock().keys()


def test_the_old_import_name_is_the_same_modules_in_a_fresh_interpreter():
    """As a provider process unpickling an old stack's state: `components.*`
    first, from the checkout's folder, then the new name; one module each."""
    code = textwrap.dedent("""
        import pickle, sys
        old = pickle.loads(b"ccomponents.mirror.provider\\nMirrorMaker2Provider\\n.")
        older = pickle.loads(b"ccomponents.mirror\\nMirrorMaker2Provider\\n.")
        import mirrorstack.mirror.provider as new
        assert old is new.MirrorMaker2Provider is older, (old, older)
        assert sys.modules["components.mirror.provider"] is new
        assert new.__spec__.name == "mirrorstack.mirror.provider" and new.__name__ == "mirrorstack.mirror.provider"
        assert sys.modules["components"] is sys.modules["mirrorstack"]
        assert not [m for m in sys.modules if m.startswith("components.") and sys.modules[m] is not sys.modules["mirrorstack" + m[10:]]]
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
