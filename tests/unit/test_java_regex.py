"""The model's regex verdicts are java.util.regex's (MM2 compiles topic and
group regexes with it): each case is compiled by the JVM and by
mirrorstack.model.java_regex, and the two must agree."""
import subprocess
from pathlib import Path

import pytest

from mirrorstack import toolchain
from mirrorstack.model.java_regex import JavaRegexError, check_java_regex as check

COMPILE = Path(__file__).parent.parent / "support" / "RegexCompile.java"

CASES = [
    # both accept
    r".*", r"orders", r"orders\..*", r"(us|uk)\.orders-[0-9]+", r"[a-z&&[^e]]+", r"\p{L}+", r"\P{Lu}",
    r"\pL\d", r"\Q.a*\E-x", r"(?<region>us|uk)\.\k<region>", r"(?i)orders", r"pre(?i)fix", r"(?i:a)b",
    r"(?U)\w+", r"(?d)a.b", r"a*+b", r"(?>ab|a)c", r"a{2}", r"a{2,}", r"a{2,5}?", r"\h\H\R\X", r"\Gx\z",
    r"\x{41}", r"\cA", r"\e", r"\00", r"[a[b]]", r"(?=a)a", r"(?<=a)b", r"(?<!a)b", r"\ttab", r"(?-i:x)",
    r"(?<a1>x)", r"topic_[^.]+", r"[]a]",
    # both refuse
    r"(", r"a)", r"*a", r"[a", r"a{2,1}", r"\y", r"a**",
    # Python accepts, Java refuses
    r"(?P<name>x)", r"(?P<name>x)(?P=name)", r"(?#comment)x", r"a{,3}", r"a{b", r"{x}", r"(?a)\w",
    r"(?<my_name>x)", r"(?<1a>x)", r"(x)?(?(1)a|b)", "\\0",
    # Java accepts, Python refuses
    r"\p{IsAlphabetic}", r"\Qa(b\E", r"(?<name>x)", r"a(?i)b", r"\z", r"\h",
]


def java_verdicts(patterns: list[str]) -> list[bool]:
    out = subprocess.run([toolchain.java_binary(), str(COMPILE), *patterns], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    assert len(out) == len(patterns), out
    return [line == "ok" for line in out]


def model_accepts(pattern: str) -> bool:
    try:
        check(pattern)
    except JavaRegexError:
        return False
    return True


def test_every_verdict_is_the_jvms():
    java = java_verdicts(CASES)
    differ = [(p, j) for p, j in zip(CASES, java) if model_accepts(p) != j]
    assert not differ, f"(pattern, java accepts) where the model disagrees: {differ}"
    assert not all(java) and any(java)  # the cases cover both verdicts


@pytest.mark.parametrize("pattern, reason, fix", [
    (r"(?P<region>us|uk)\..*", "named group (?P<name>...)", "write (?<region>...)"),
    (r"(?P<r>x)(?P=r)", "named group", "write (?<r>...)"),
    (r"(?#all)orders", "(?#...) comment", "remove the comment"),
    (r"(?<my_name>x)", "'my_name' is not a Java group name", "(?<myname>...)"),
    (r"a{,3}", "{,n} quantifier", "write {0,3}"),
    (r"{orders}", "'{' that is not a quantifier", "escape it as \\{"),
])
def test_python_only_syntax_gets_the_java_spelling(pattern, reason, fix):
    with pytest.raises(JavaRegexError) as info:
        check(pattern)
    assert reason in info.value.reason
    assert fix in info.value.fix
