"""ast.parse that survives CPython 3.11's shared AST depth counter: a parse can raise SystemError
"AST constructor recursion depth mismatch" when another thread parses or builds an AST meanwhile
(python/cpython#106905; a docker stack's `up` failed so in a fresh-clone suite run). The mismatch
is transient: the parse is tried again."""
from __future__ import annotations

import ast

ATTEMPTS = 3
MISMATCH = "recursion depth mismatch"


def parse_again_on_mismatch(parse=ast.parse, attempts: int = ATTEMPTS):
    def parse_with_retry(*args, **kwargs):
        for attempt in range(attempts):
            try:
                return parse(*args, **kwargs)
            except SystemError as error:
                if MISMATCH not in str(error) or attempt == attempts - 1:
                    raise
    return parse_with_retry


parse = parse_again_on_mismatch()
