"""Example topic names a flow's regex matches, for rules that follow a topic
through flows (model/cycles.py).

Built from Python's parse of the regex (after java_regex's translation): each
repetition taken its fewest times, and then at least once, each alternative in
turn, each class by its first legal topic character. Every example is checked
with a full match, so a construct taken loosely here only costs an example,
never yields a wrong one; a regex not understood gives none. Pure: no pulumi.
"""
from __future__ import annotations

import re
import warnings
from itertools import product

from mirrorstack.model.java_regex import JavaRegexError, python_equivalent
from mirrorstack.model.regex_reach import C, TOPIC_CHARS, sre_parse

ORDERED_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_-.ABCDEFGHIJKLMNOPQRSTUVWXYZ"
MAX_EXAMPLES = 8


def examples(pattern: str) -> list[str]:
    """Up to MAX_EXAMPLES legal topic names `pattern` fully matches (maybe none)."""
    if sre_parse is None:
        return []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            python = python_equivalent(pattern)
            tree = sre_parse.parse(python)
            compiled = re.compile(python)
    except (JavaRegexError, re.error):
        return []
    out: list[str] = []
    for at_least_once in (False, True):
        try:
            names = _sequence(list(tree), at_least_once)
        except _Unknown:
            return []
        for name in names:
            if name and set(name) <= TOPIC_CHARS and compiled.fullmatch(name) and name not in out:
                out.append(name)
    return out[:MAX_EXAMPLES]


class _Unknown(Exception):
    """A node this module does not follow."""


def _sequence(nodes, once: bool) -> list[str]:
    parts = [_node(op, av, once) for op, av in nodes]
    return ["".join(p) for p in product(*parts)][:MAX_EXAMPLES] if all(parts) else []


def _node(op, av, once: bool) -> list[str]:
    if op == C.LITERAL:
        return [chr(av)]
    if op in (C.ANY, C.NOT_LITERAL):
        return [next(c for c in ORDERED_CHARS if op == C.ANY or c != chr(av))]
    if op == C.IN:
        hits = [c for c in ORDERED_CHARS if re.fullmatch(_class_regex(av), c)]
        return hits[:1]
    if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
        return [""]
    if op == C.SUBPATTERN:
        return _sequence(list(av[3]), once)
    if op == C.ATOMIC_GROUP:
        return _sequence(list(av), once)
    if op == C.BRANCH:
        return [s for branch in av[1] for s in _sequence(list(branch), once)][:MAX_EXAMPLES]
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        low, high, item = av
        times = max(low, 1) if once else low
        times = min(times, high)
        return ["".join(p) for p in product(_sequence(list(item), once), repeat=times)][:MAX_EXAMPLES]
    raise _Unknown(op)


def _class_regex(items) -> str:
    """A parsed `[...]` back as a regex: only to test single characters against it."""
    negate = bool(items) and items[0][0] == C.NEGATE
    body = []
    for op, av in items[1:] if negate else items:
        if op == C.LITERAL:
            body.append(re.escape(chr(av)))
        elif op == C.RANGE:
            body.append(f"{re.escape(chr(av[0]))}-{re.escape(chr(av[1]))}")
        elif op == C.CATEGORY:
            body.append({C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D", C.CATEGORY_WORD: r"\w",
                         C.CATEGORY_NOT_WORD: r"\W", C.CATEGORY_SPACE: r"\s",
                         C.CATEGORY_NOT_SPACE: r"\S"}.get(av, ""))
        else:
            raise _Unknown(op)
    return f"[{'^' if negate else ''}{''.join(body)}]"
