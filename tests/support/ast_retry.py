"""pytest parses a failing test's source to show its statement. On CPython
3.11.7 (this machine's) a parse can raise SystemError "AST constructor
recursion depth mismatch" when another thread parses or builds an AST
meanwhile (the depth counter is the interpreter's, not the thread's:
python/cpython#106905). Raised while reporting a failure, it crashed the xdist
worker and so ended the whole suite with INTERNALERROR and no report. The
mismatch is transient: the parse is tried again."""
from __future__ import annotations

import ast
import types

from mirrorstack.source_parsing import parse_again_on_mismatch


def install() -> None:
    """pytest's source module sees an `ast` whose parse tries again; nothing else changes."""
    import _pytest._code.source as source

    if not isinstance(source.ast, types.SimpleNamespace):
        source.ast = types.SimpleNamespace(**{**vars(ast), "parse": parse_again_on_mismatch()})
