"""Test modules import no other test module: what several tests share lives in
tests/support, so a test module can be moved, renamed or deleted without
breaking another (and pytest never imports a test module twice, once as a
test and once as a library)."""
from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
TEST_PACKAGES = ("tests.unit", "tests.integration")  # modules of tests, and their conftest files


def imported_modules(path: Path, root: Path = TESTS.parent) -> list[str]:
    """The absolute names of the modules `path` imports (relative imports
    resolved; `root` is the folder the package names start from)."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            # `from tests.unit import test_x` imports the module tests.unit.test_x
            into_package = not node.module or base in ("tests", *TEST_PACKAGES)
            found += [f"{base}.{alias.name}" for alias in node.names] if into_package else [base]
    return found


def test_module_imports(path: Path, root: Path = TESTS.parent) -> list[str]:
    """The imports of another test module in `path`."""
    return [name for name in imported_modules(path, root)
            if any(name == package or name.startswith(f"{package}.") for package in TEST_PACKAGES)]


test_module_imports.__test__ = False  # a helper, not a test


def test_no_test_module_imports_another():
    offences = {str(path.relative_to(TESTS.parent)): names
                for path in sorted(TESTS.rglob("*.py")) if (names := test_module_imports(path))}
    assert offences == {}, "move what they share into tests/support: " + "; ".join(
        f"{path} imports {', '.join(names)}" for path, names in offences.items())


def test_the_check_sees_each_form_of_import(tmp_path):
    forms = {"from tests.unit.test_stacks import STACKS": ["tests.unit.test_stacks"],
             "import tests.integration.conftest": ["tests.integration.conftest"],
             "from tests.unit import test_stacks as other": ["tests.unit.test_stacks"],
             "from .test_stacks import STACKS": ["tests.unit.test_stacks"],
             "from . import golden": ["tests.unit.golden"],
             "from tests import unit": ["tests.unit"],
             "from tests.support.pulumi_mocks import deploy": []}
    for line, expected in forms.items():
        module = tmp_path / "tests" / "unit" / "test_example.py"
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text(f"{line}\n")
        assert test_module_imports(module, tmp_path) == expected, line
