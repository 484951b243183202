"""components/model/regex_reach.py: which regexes surely match no legal topic
name (refused by the model) and which may (accepted, including the documented
cases it lets through though they match nothing)."""
from __future__ import annotations

import re

import pytest

from mirrorstack.model.regex_reach import CAP, can_match_a_topic, matches_only_empty, topic_lengths

NO_TOPIC = {
    "": "the empty name only",
    "^$": "anchors only",
    "(?:)": "an empty group",
    "a b": "a space, which no topic name has",
    "   ": "only spaces",
    "[ !@]+": "a class of illegal characters only",
    "orders/eu": "a slash",
    r"\s+": "whitespace",
    r"[\s]": "a class of whitespace",
    r"\Q a \E": "a Java literal with spaces",
    "ö": "a non-ASCII letter",
    r"\w{0}": "zero repetitions",
    ".{250}": "only names over 249 characters",
    "x{249}y": "250 characters",
    "(a b|c d)": "every alternative impossible",
    "(?=x)": "zero-width only",
}
MAY_MATCH = {
    ".*": "everything", "orders": "a literal", r"orders\..*": "a prefix", "a|b c": "one alternative possible",
    r"\S+": "non-space", "[^ ]": "a negated class", r"\p{Lower}+": "a Java Unicode class",
    "[a-z&&[^aeiou]]+": "Java's class intersection", r"(a)\1": "a back reference", "^orders$": "anchored",
    ".{249}": "the longest legal name", r"\d*": "digits", "(?x) a b": "Java's comments flag: spaces ignored",
    "(?iu)\u212a": "the Kelvin sign folds to 'k' under Java's (?iu)", "(?<r>us|uk)-\\k<r>": "a Java back reference",
    "a^b": "anchors inside a name: matches nothing, but is not judged (documented)",
    "(?=x)y": "a lookahead that contradicts: matches nothing, but is not judged (documented)",
}


@pytest.mark.parametrize("pattern", NO_TOPIC, ids=NO_TOPIC.values())
def test_a_regex_that_surely_matches_no_topic_name_is_found(pattern):
    assert not can_match_a_topic(pattern)


@pytest.mark.parametrize("pattern", MAY_MATCH, ids=MAY_MATCH.values())
def test_a_regex_that_may_match_a_topic_name_is_let_through(pattern):
    assert can_match_a_topic(pattern)


def test_the_lengths_are_exact_for_plain_regexes():
    def lengths(pattern):
        mask = topic_lengths(pattern)
        return [n for n in range(CAP + 1) if mask >> n & 1]
    assert lengths("ab?c{2,3}") == [3, 4, 5]
    assert lengths("(ab|c)+d") == list(range(2, CAP + 1))
    assert lengths("x{300}") == [CAP]  # CAP: "CAP characters or more"
    assert lengths("a b") == []
    assert topic_lengths("(?x)a b") is None  # not judged


def test_the_analysis_agrees_with_re_on_legal_names_it_allows():
    # where Python and Java agree, a name re matches has a length the analysis allows
    for pattern, name in [("ab?c{2,3}", "abcc"), ("[a-c]+-[0-9]{2}", "abc-12"), (r"(\w|\.)+", "orders.eu")]:
        assert re.fullmatch(pattern, name) and topic_lengths(pattern) >> len(name) & 1


@pytest.mark.parametrize("pattern, empty_only", [("", True), ("^$", True), ("()", True), ("(?:^)$", True),
                                                 ("a b", False), (".*", False), ("x?", False)])
def test_a_group_regex_matching_only_the_empty_name_is_found(pattern, empty_only):
    assert matches_only_empty(pattern) is empty_only


def test_a_regex_of_names_too_long_only_is_told_apart():
    from mirrorstack.model.regex_reach import matches_only_too_long
    assert matches_only_too_long(".{250}") and matches_only_too_long("x{249}y")
    assert not matches_only_too_long(".{249}") and not matches_only_too_long("a b")
