"""Patterns a request may send are bounded in shape before they are compiled (strategies.patterns)."""

from __future__ import annotations

import sys

import pytest
import regex

from strategies.patterns import MAX_LENGTH, PatternError, check, compile_pattern


@pytest.mark.parametrize(
    "pattern",
    ["^Search results:", "^Train options", r"^(?:Quotes|Fares) for \d{1,4}", r"(?<=x)y(?!z)", r"^(a|b){2,5}$"],
)
def test_ordinary_patterns_pass(pattern: str) -> None:
    check(pattern)


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(?:a{1000}){1000}", "counted repeat over 100"),
        ("(?:a{50}){50}", "over 1000 in all"),
        ("(a+)+$", "unbounded repeat inside another"),
        ("(?:(?:a*)b)*", "unbounded repeat inside another"),
        ("(" * 120 + "a" + ")" * 120, "nested more than 8 deep"),
        ("(" * 3000 + ")" * 3000, f"longer than {MAX_LENGTH}"),
        ("(unclosed", "invalid regular expression"),
    ],
)
def test_costly_or_broken_patterns_are_refused_saying_why(pattern: str, reason: str) -> None:
    with pytest.raises(PatternError, match=reason):
        check(pattern)


def test_compiling_leaves_nothing_in_the_engines_cache() -> None:
    # The regex engine keeps compiled patterns in a process-wide cache; twelve large ones used to stay in
    # memory for good (1.7 GB). Checked and compiled here, none stays.
    engine = sys.modules[regex.compile.__module__]  # regex._main in current releases, where its cache lives
    before = len(engine._cache)
    for count in range(90, 100):
        pattern = f"^(?:ab{{{count}}}c)"
        check(pattern)
        compile_pattern(pattern).search("x")
    regex.compile("^cached(?:for)?comparison$")  # what the engine does without cache_pattern=False
    assert len(engine._cache) == before + 1
