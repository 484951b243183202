"""A failure report survives CPython 3.11.7's transient AST depth mismatch (tests/support/ast_retry.py)."""
import ast

import _pytest._code.source as pytest_source
import pytest

from tests.support.ast_retry import parse_again_on_mismatch


def _flaky(failures: int, message: str = "AST constructor recursion depth mismatch (before=144, after=195)"):
    calls = []

    def parse(*args, **kwargs):
        calls.append(args)
        if len(calls) <= failures:
            raise SystemError(message)
        return ast.parse(*args, **kwargs)
    return parse, calls


def test_a_mismatch_is_parsed_again():
    parse, calls = _flaky(failures=2)
    tree = parse_again_on_mismatch(parse)("x = 1", "source", "exec")
    assert isinstance(tree.body[0], ast.Assign) and len(calls) == 3


def test_a_lasting_mismatch_and_other_system_errors_still_raise():
    parse, calls = _flaky(failures=5)
    with pytest.raises(SystemError, match="mismatch"):
        parse_again_on_mismatch(parse, attempts=3)("x = 1")
    assert len(calls) == 3
    parse, calls = _flaky(failures=1, message="something else")
    with pytest.raises(SystemError, match="something else"):
        parse_again_on_mismatch(parse)("x = 1")
    assert len(calls) == 1


def test_pytests_statement_ranges_use_it():
    """Installed by tests/conftest.py: the report of a failure finds the statement through it."""
    assert pytest_source.ast.parse.__name__ == "parse_with_retry"
    source = pytest_source.Source("def f():\n    assert (1 ==\n            2)\n")
    assert str(source.getstatement(2)) == "    assert (1 ==\n            2)"


def test_up_scanning_the_files_it_ships_parses_again_on_a_mismatch(monkeypatch, tmp_path):
    """The program's own parse (which files a service ships) runs beside other threads too: a docker
    stack's `up` failed on the mismatch in a fresh-clone suite run."""
    from mirrorstack import shipping, source_parsing
    parse, calls = _flaky(failures=2)
    monkeypatch.setattr(source_parsing, "parse", parse_again_on_mismatch(parse))
    module = tmp_path / "m.py"
    module.write_text("import mirrorstack.naming\n")
    assert shipping._imported_by(module, "mirrorstack") == {"mirrorstack.naming"} and len(calls) == 3
