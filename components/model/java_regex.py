"""Does a regex compile with java.util.regex, MM2's regex engine?

MM2 compiles `topics`, `groups` and their excludes with java.util.Pattern, so
Python's `re` is the wrong judge both ways: it accepts Python-only syntax
(`(?P<name>...)`, `(?#...)`, `{,3}`) that Java refuses, and refuses Java
syntax (`\\p{L}`, `\\Q...\\E`, `(?<name>...)`) that MM2 accepts. This module
refuses the Python-only constructs with their Java spelling, rewrites the
Java-only ones into Python equivalents, and lets `re` check what remains (the
two agree on the rest). tests/unit/test_java_regex.py checks the verdicts
against the JVM.
"""
from __future__ import annotations

import re
import warnings

JAVA_GROUP_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")
JAVA_FLAGS = set("idmsuxU")
PYTHON_ONLY_FLAGS = {"a": "(Java has no ASCII flag; \\w is ASCII by default there)", "L": "(locale flag)"}
QUANTIFIER = re.compile(r"\{(\d+)(,(\d*))?\}")
# Java escapes Python's `re` lacks, with a stand-in of the same syntactic role.
JAVA_ONLY_ESCAPES = {"h": "x", "H": "x", "R": "x", "X": "x", "G": "", "z": r"\Z", "e": "x"}


class JavaRegexError(ValueError):
    def __init__(self, reason: str, fix: str):
        super().__init__(reason)
        self.reason, self.fix = reason, fix


def check_java_regex(pattern: str) -> None:
    """Raise JavaRegexError (reason, fix) when java.util.regex would refuse `pattern`."""
    translated = _translate(pattern)
    with warnings.catch_warnings():  # Java's `[a&&b]` / nested classes: FutureWarning in re
        warnings.simplefilter("ignore")
        try:
            re.compile(translated)
        except re.error as e:
            raise JavaRegexError(f"does not compile ({e.msg})", "correct the regex") from None


def python_equivalent(pattern: str) -> str:
    """`pattern` in Python's `re` syntax, for analysing it (components/model/regex_reach.py):
    Java-only constructs become stand-ins of the same syntactic role (a class
    like \\p{L} one legal character, inline flags dropped), so what Python
    matches is not always what Java does. Raises JavaRegexError as check_java_regex."""
    return _translate(pattern)


def _translate(p: str) -> str:
    out: list[str] = []
    i, n, in_class = 0, len(p), 0
    while i < n:
        c = p[i]
        if c == "\\":
            if i + 1 >= n:
                raise JavaRegexError("ends with a lone backslash", "escape it as \\\\")
            e = p[i + 1]
            if e == "Q":  # \Q...\E: a literal
                end = p.find("\\E", i + 2)
                literal = p[i + 2:] if end < 0 else p[i + 2:end]
                out.append(re.escape(literal) if not in_class else re.escape(literal))
                i = n if end < 0 else end + 2
                continue
            if e in "pP":  # \p{L}, \pL: a Unicode class
                if i + 2 < n and p[i + 2] == "{":
                    end = p.find("}", i + 3)
                    if end < 0:
                        raise JavaRegexError("has an unclosed \\p{", "close it: \\p{Name}")
                    i = end + 1
                else:
                    i += 3
                out.append("x")
                continue
            if e == "k":  # \k<name>: a named back reference
                m = re.match(r"<([^>]*)>", p[i + 2:])
                if not m:
                    raise JavaRegexError("has \\k without <name>", "write \\k<name>")
                out.append(f"(?P={m.group(1)})" if JAVA_GROUP_NAME.fullmatch(m.group(1)) else "(?P=-)")
                i += 2 + m.end()
                continue
            if e == "x" and i + 2 < n and p[i + 2] == "{":
                end = p.find("}", i + 3)
                out.append("x")
                i = n if end < 0 else end + 1
                continue
            if e == "c" and i + 2 < n:  # \cX: a control character
                out.append("x")
                i += 3
                continue
            if e in JAVA_ONLY_ESCAPES:
                out.append(JAVA_ONLY_ESCAPES[e] if not in_class or e != "G" else "x")
                i += 2
                continue
            if e == "0":  # Java's octal needs a digit after \0
                m = re.match(r"[0-7]{1,3}", p[i + 2:])
                if not m:
                    raise JavaRegexError("has \\0 without octal digits", "write \\0 followed by 1-3 octal digits, e.g. \\00")
                out.append("x")
                i += 2 + m.end()
                continue
            out.append(p[i:i + 2])
            i += 2
            continue
        if in_class:
            if c == "[":  # Java nests classes; a second '[' opens one
                in_class += 1
                out.append("\\[")
            elif c == "]":
                in_class -= 1
                out.append("]" if in_class == 0 else "\\]")
            else:
                out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = 1
            out.append(c)
            i += 1
            if i < n and p[i] == "^":
                out.append("^")
                i += 1
            if i < n and p[i] == "]":  # a ']' first in a class is a literal, as in Python
                out.append("\\]")
                i += 1
            continue
        if c == "{":
            m = QUANTIFIER.match(p, i)
            if p.startswith("{,", i):
                raise JavaRegexError("uses Python's {,n} quantifier",
                                     "write {0," + p[i + 2:p.find("}", i) if "}" in p[i:] else n] + "}")
            if not m:
                raise JavaRegexError("has a '{' that is not a quantifier (Java refuses it)", "escape it as \\{")
            out.append(m.group(0))
            i = m.end()
            continue
        if c == "(" and p.startswith("(?", i):
            i = _group_opening(p, i, out)
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _group_opening(p: str, i: int, out: list[str]) -> int:
    """Translate the `(?...` at i; return where to continue."""
    rest = p[i + 2:]
    if rest.startswith("P<"):
        name = rest[2:].split(">", 1)[0]
        raise JavaRegexError("uses Python's named group (?P<name>...)",
                             f"write (?<{_java_name(name)}>...)")
    if rest.startswith("P="):
        name = rest[2:].split(")", 1)[0]
        raise JavaRegexError("uses Python's back reference (?P=name)", f"write \\k<{_java_name(name)}>")
    if rest.startswith("#"):
        raise JavaRegexError("has a Python (?#...) comment", "remove the comment (Java has no inline comments)")
    if rest.startswith("("):
        raise JavaRegexError("uses Python's conditional group (?(id)yes|no)", "write the alternatives out with |")
    if rest.startswith("<") and not rest.startswith(("<=", "<!")):
        name = rest[1:].split(">", 1)[0]
        if not JAVA_GROUP_NAME.fullmatch(name):
            raise JavaRegexError(f"group name {name!r} is not a Java group name",
                                 f"use letters and digits, starting with a letter, e.g. (?<{_java_name(name)}>...)")
        out.append(f"(?P<{name}>")
        return i + 3 + len(name) + 1
    m = re.match(r"([A-Za-z]*)(?:-([A-Za-z]*))?([:)])", rest)
    if m and (m.group(1) or m.group(2) is not None):  # inline flags: (?i) or (?i-s:...)
        for flag in (m.group(1) or "") + (m.group(2) or ""):
            if flag in PYTHON_ONLY_FLAGS:
                raise JavaRegexError(f"uses Python's inline flag {flag!r} {PYTHON_ONLY_FLAGS[flag]}",
                                     "remove it; Java's flags are i, d, m, s, u, x, U")
            if flag not in JAVA_FLAGS:
                raise JavaRegexError(f"has an unknown inline flag {flag!r}", "use Java's flags i, d, m, s, u, x, U")
        out.append("(?:" if m.group(3) == ":" else "")  # Java takes flags anywhere; Python only at the start
        return i + 2 + m.end()
    out.append("(?")
    return i + 2


def _java_name(name: str) -> str:
    """A Java group name close to `name`: letters and digits, starting with a letter."""
    cleaned = re.sub(r"[^A-Za-z0-9]", "", name)
    return cleaned if cleaned[:1].isalpha() else f"g{cleaned}"
