"""Can a flow's regex match any name at all? A topic regex that can match no
legal topic name (Kafka: 1-249 characters of letters, digits, '.', '_', '-'),
or a group regex that matches only the empty name, makes MM2 copy nothing,
silently; the model refuses both (components/model/rules.py).

The answer is the set of lengths of legal-character strings the regex can fully
match (MM2 uses Java's `matches()`), worked out over the regex's syntax tree
(Python's own parser, after java_regex's translation of Java-only syntax): a
concatenation adds lengths, an alternation unites them, a repetition repeats
the addition. For plain regexes (characters, classes, groups, alternation,
repetition) that answer is exact. Everything else is taken generously, so a
regex is only ever refused when it surely matches no legal name:
- anchors, word boundaries and lookarounds are taken as matching anywhere
  (so `a^b` or `(?=x)y` are accepted though they match nothing);
- a back reference as matching anything;
- a class with Java's set operations (nested `[..]`, `&&`) as any character;
- a regex with Java's comments flag (`(?x)`) is not judged at all; under `(?i)`
  any non-ASCII character may match a legal one (Java's Unicode case folding);
- the names `.` and `..`, which Kafka refuses too, count as legal.
An unexpected node of the syntax tree makes the answer "may match" (accepted).
"""
from __future__ import annotations

import re
import string
import warnings

from mirrorstack.model.java_regex import JavaRegexError, python_equivalent

try:  # CPython's regex parser (3.11+: re._parser); without it, nothing is judged
    from re import _constants as C, _parser as sre_parse
except ImportError:  # pragma: no cover (older or other Pythons)
    C = sre_parse = None

TOPIC_CHARS = frozenset(string.ascii_letters + string.digits + "._-")
MAX_TOPIC = 249  # characters (org.apache.kafka.common.internals.Topic)
CAP = MAX_TOPIC + 1  # lengths from here on are one bucket, "too long"
EVERY_LENGTH = (1 << (CAP + 1)) - 1
EMPTY_ONLY = 1  # bit n set: a name of length n can match
JAVA_FLAGS = re.compile(r"\(\?([A-Za-z]*)(?:-[A-Za-z]*)?[:)]")


def topic_lengths(pattern: str) -> int | None:
    """Bit n set: the regex can fully match a legal-character string of n
    characters (n = CAP: CAP or more). None: not judged (see the module)."""
    flags = "".join(JAVA_FLAGS.findall(pattern))
    if "x" in flags:
        return None
    return _lengths_of(pattern, lambda node: _matches_a_topic_char(node, ignore_case="i" in flags))


def matches_only_empty(pattern: str) -> bool:
    """Whether the regex can match only the empty name, whatever the characters
    (`""`, `^$`, `()`): e.g. a group regex that selects nothing."""
    return _lengths_of(pattern, lambda node: True) == EMPTY_ONLY


def can_match_a_topic(pattern: str) -> bool:
    """False only when the regex surely matches no legal topic name."""
    lengths = topic_lengths(pattern)
    return lengths is None or bool(lengths & ((1 << CAP) - 2))  # some length in 1..249


def matches_only_too_long(pattern: str) -> bool:
    """Whether every legal-character name the regex matches is over MAX_TOPIC characters."""
    return topic_lengths(pattern) == 1 << CAP


def _lengths_of(pattern: str, char_matches) -> int | None:
    if sre_parse is None:
        return None
    try:
        with warnings.catch_warnings():  # Java's nested classes: FutureWarning in re
            warnings.simplefilter("ignore")
            tree = sre_parse.parse(python_equivalent(pattern))
    except (JavaRegexError, re.error):  # refused by the Java regex rule already
        return None
    try:
        return _sequence(list(tree), char_matches)
    except _Unknown:
        return None


class _Unknown(Exception):
    """A node this analysis does not know."""


def _plus(a: int, b: int) -> int:
    """Lengths of a string of `a` followed by one of `b`, capped at CAP."""
    out = 0
    for n in range(CAP + 1):
        if a >> n & 1:
            out |= b << n
    return (out & EVERY_LENGTH) | ((1 << CAP) if out >> CAP else 0)


def _repeat(item: int, low: int, high: int) -> int:
    """Lengths of `low` to `high` repetitions (high: C.MAXREPEAT unbounded).
    The sums grow monotonically or saturate within CAP + 2 steps."""
    acc = EMPTY_ONLY
    for _ in range(min(low, CAP + 2)):
        acc = _plus(acc, item)
    more = acc
    for _ in range(min(high - low, CAP + 2)):
        nxt = more | _plus(more, item)
        if nxt == more:
            break
        more = nxt
    return more


def _sequence(nodes, char_matches) -> int:
    acc = EMPTY_ONLY
    for op, av in nodes:
        acc = _plus(acc, _node(op, av, char_matches))
    return acc


def _node(op, av, char_matches) -> int:
    if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
        return 0b10 if char_matches((op, av)) else 0
    if op in (C.AT, C.ASSERT, C.ASSERT_NOT):  # zero-width: taken as matching anywhere
        return EMPTY_ONLY
    if op == C.GROUPREF:
        return EVERY_LENGTH
    if op == C.SUBPATTERN:
        return _sequence(list(av[3]), char_matches)
    if op == C.ATOMIC_GROUP:
        return _sequence(list(av), char_matches)
    if op == C.BRANCH:
        out = 0
        for branch in av[1]:
            out |= _sequence(list(branch), char_matches)
        return out
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        low, high, item = av
        return _repeat(_sequence(list(item), char_matches), low, high)
    if op == C.GROUPREF_EXISTS:
        _, yes, no = av
        return _sequence(list(yes), char_matches) | (_sequence(list(no), char_matches) if no else EMPTY_ONLY)
    raise _Unknown(op)


def _matches_a_topic_char(node, ignore_case: bool) -> bool:
    op, av = node
    if op in (C.ANY, C.NOT_LITERAL):  # every legal character but (at most) one
        return True
    if op == C.LITERAL:
        return _legal(chr(av), ignore_case)
    return any(_in_class(av, c) for c in TOPIC_CHARS) or (ignore_case and _non_ascii_in_class(av))


def _legal(c: str, ignore_case: bool) -> bool:
    return c in TOPIC_CHARS or (ignore_case and not c.isascii())


def _in_class(items, c: str) -> bool:
    """Whether the class (a parsed `[...]`) takes the legal character c."""
    negate = bool(items) and items[0][0] == C.NEGATE
    hit = False
    for op, av in items[1:] if negate else items:
        if op == C.LITERAL and chr(av) in "[&":  # Java's nested class or `&&`: any character
            return True
        if op == C.LITERAL:
            hit |= chr(av) == c
        elif op == C.RANGE:
            hit |= av[0] <= ord(c) <= av[1]
        elif op == C.CATEGORY:
            hit |= _category(av, c)
        else:
            raise _Unknown(op)
    return hit != negate


def _non_ascii_in_class(items) -> bool:
    """Under (?i): whether the class may take a non-ASCII character (one that
    folds to a legal one, as the Kelvin sign to 'k')."""
    if items and items[0][0] == C.NEGATE:
        return True
    return any(op != C.LITERAL or not chr(av).isascii() for op, av in items)


def _category(category, c: str) -> bool:
    """\\d, \\w, \\s and their negations, for an ASCII legal character."""
    named = {C.CATEGORY_DIGIT: c.isdigit(), C.CATEGORY_WORD: c.isalnum() or c == "_", C.CATEGORY_SPACE: False}
    for plain, negated in ((C.CATEGORY_DIGIT, C.CATEGORY_NOT_DIGIT), (C.CATEGORY_WORD, C.CATEGORY_NOT_WORD),
                           (C.CATEGORY_SPACE, C.CATEGORY_NOT_SPACE)):
        if category == plain:
            return named[plain]
        if category == negated:
            return not named[plain]
    raise _Unknown(category)
