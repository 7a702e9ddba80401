"""Regular expressions a request may send (trim_bulky's patterns): bounded before they are compiled.

A pattern is code run on the proxy's CPU. Nested counted repeats (`(?:a{1000}){1000}`) compile to programs
of millions of steps and hundreds of megabytes; nested unbounded repeats (`(a+)+`) backtrack exponentially;
a 3,000-deep group overflows the parser's stack. What is checked here is the pattern's shape; what a search
may still cost is bounded by the per-search and per-request time limits of the strategy that runs it.

The shape is read with the standard library's own parser (re._parser), so a pattern must also be valid
`re` syntax; it is compiled with the `regex` engine, whose searches can time out.
"""

from __future__ import annotations

import re

# The stdlib's own parser: private (no type stubs), but stable across 3.11-3.13; sre_parse is its deprecated alias.
import re._parser as sre_parse  # type: ignore[import-not-found]
from typing import Any

import regex

MAX_PATTERNS = 16
MAX_LENGTH = 256
MAX_DEPTH = 8  # groups and repeats nested in one another
MAX_COUNT = 100  # the upper bound of a counted repeat, {m,n}
MAX_COUNT_PRODUCT = 1_000  # counted repeats multiply when nested

_REPEATS = {sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT, getattr(sre_parse, "POSSESSIVE_REPEAT", None)} - {None}
_UNBOUNDED = sre_parse.MAXREPEAT


class PatternError(ValueError):
    pass


def check(pattern: str) -> None:
    """Raises PatternError naming what makes the pattern too costly to run, or invalid."""
    if len(pattern) > MAX_LENGTH:
        raise PatternError(f"longer than {MAX_LENGTH} characters")
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise PatternError(f"invalid regular expression: {exc}") from None
    _walk(list(parsed), depth=0, product=1, unbounded=False)
    try:
        regex.compile(pattern, cache_pattern=False)
    except (regex.error, RecursionError, OverflowError) as exc:
        raise PatternError(f"invalid regular expression: {exc}") from None


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """A checked pattern, compiled without entering the engine's process-wide cache."""
    return regex.compile(pattern, cache_pattern=False)


def _walk(items: list[tuple[Any, Any]], depth: int, product: int, unbounded: bool) -> None:
    for op, argument in items:
        if op in _REPEATS:
            low, high, body = argument
            inner_unbounded = high == _UNBOUNDED
            if inner_unbounded and unbounded:
                raise PatternError("an unbounded repeat inside another ((a+)+ backtracks exponentially)")
            if not inner_unbounded:
                if high > MAX_COUNT:
                    raise PatternError(f"a counted repeat over {MAX_COUNT}")
                product *= max(1, high)
                if product > MAX_COUNT_PRODUCT:
                    raise PatternError(f"nested counted repeats over {MAX_COUNT_PRODUCT} in all")
            _nested(list(body), depth, product, unbounded or inner_unbounded)
        elif op is sre_parse.SUBPATTERN:
            _nested(list(argument[-1]), depth, product, unbounded)
        elif op is sre_parse.BRANCH:
            for branch in argument[1]:
                _nested(list(branch), depth, product, unbounded)
        elif op in (sre_parse.ASSERT, sre_parse.ASSERT_NOT):
            _nested(list(argument[1]), depth, product, unbounded)
        elif op is getattr(sre_parse, "ATOMIC_GROUP", None):
            _nested(list(argument), depth, product, unbounded)
        elif op is sre_parse.GROUPREF_EXISTS:
            for branch in argument[1:]:
                if branch is not None:
                    _nested(list(branch), depth, product, unbounded)


def _nested(items: list[tuple[Any, Any]], depth: int, product: int, unbounded: bool) -> None:
    if depth + 1 > MAX_DEPTH:
        raise PatternError(f"groups or repeats nested more than {MAX_DEPTH} deep")
    _walk(items, depth + 1, product, unbounded)
