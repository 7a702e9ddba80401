"""Lossless clean-up of tool results: compact JSON, no terminal escape codes, no trailing blanks, no repeats.

Nothing the model could need is removed, so only the repeat collapse leaves a marker, and that marker says
exactly what it stands for (N more copies of the line above it). Escape codes are the exception found on real
traces: a model that copies a test's expected coloured output sees it without its colour codes (3 of 39,023 lines
quoted back in 500 mini-swe-agent sessions; docs/strategies.md).
"""

from __future__ import annotations

import itertools
import json
import re
from functools import partial
from typing import Any

from pydantic import Field

from .base import Applied, Params, Strategy
from .context import Context
from .conversation import rewrite_tool_results
from .markers import repeated
from .messages import Message


class MinifyParams(Params):
    min_repeats: int = Field(
        3,
        ge=2,
        description="Identical consecutive lines collapsed once a run is this long (and the marker is shorter).",
    )


# 7-bit escape sequences only: raw ESC cannot occur in valid JSON, whereas the 8-bit C1 forms (U+009B ...)
# can sit inside JSON strings. Unterminated or malformed sequences are left as they are.
ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor movement, erase (ESC [ 1;31 m)
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: window titles, hyperlinks, ended by BEL or ST
    r"|\x1b[PX^_][^\x1b]*\x1b\\"  # DCS, SOS, PM, APC strings, ended by ST
    r"|\x1b[ -/]*[0-OQ-WYZ\\`-~]"  # the rest: charset selection (ESC ( B), ESC 7, ESC =, ESC c ...
)


# Passes of the rules before giving up on a text that keeps changing (see minify_text).
MAX_PASSES = 16


class _Unsafe(Exception):
    """The text is JSON, but rewriting it could change what a parser reads from it."""


def _parse_float(literal: str) -> float:
    value = float(literal)
    # json.dumps writes float.__repr__: 1e2, 1.50 or 1E400 (infinity) would come back written differently.
    if repr(value) != literal:
        raise _Unsafe
    return value


def _parse_int(literal: str) -> int:
    try:
        value = int(literal)
    except ValueError:  # over Python's 4300-digit conversion limit
        raise _Unsafe from None
    if str(value) != literal:  # -0
        raise _Unsafe
    return value


def _parse_constant(literal: str) -> Any:
    raise _Unsafe  # NaN, Infinity, -Infinity: not JSON, even though Python reads them


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads keeps the last of duplicate keys; a rewrite would silently drop the others.
    if len({key for key, _ in pairs}) != len(pairs):
        raise _Unsafe
    return dict(pairs)


def _loads(text: str) -> Any:
    return json.loads(
        text,
        parse_float=_parse_float,
        parse_int=_parse_int,
        parse_constant=_parse_constant,
        object_pairs_hook=_unique_keys,
    )


def compact_json(text: str) -> str | None:
    """The compact form of a JSON object or array; the text itself when it is JSON that must stay as it is;
    None when it is no JSON at all.
    """
    try:
        data = _loads(text)
    except (_Unsafe, RecursionError):  # RecursionError: nested too deep to check, so leave it alone
        return text
    except ValueError:
        return None
    if not isinstance(data, dict | list):
        return text
    compact = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    try:
        # An escaped lone surrogate (\ud800) would be written raw, which cannot be sent as UTF-8.
        compact.encode("utf-8")
        same = _loads(compact) == data
    except (_Unsafe, UnicodeEncodeError, ValueError, RecursionError):
        same = False
    return compact if same and len(compact) < len(text) else text


def _collapse_repeats(lines: list[str], min_repeats: int) -> list[str]:
    out: list[str] = []
    for line, group in itertools.groupby(lines):
        n = sum(1 for _ in group) - 1  # further copies
        marker = repeated(n)
        if n + 1 >= min_repeats and n * (len(line) + 1) > len(marker) + 1:
            out += [line, marker]
        else:
            out += [line] * (n + 1)
    return out


def _step(text: str, min_repeats: int) -> str:
    """One pass of the rules; the result is the text itself or strictly shorter."""
    text = _strip_ansi(text)
    compact = compact_json(text)
    if compact is not None:
        return compact  # line rules could break a JSON document (or change its data)
    lines = [line.rstrip() for line in text.split("\n")]
    return "\n".join(_collapse_repeats(lines, min_repeats))


def _strip_ansi(text: str) -> str:
    return ANSI.sub("", text) if "\x1b" in text else text


def minify_text(text: str, min_repeats: int = 3) -> str:
    """Apply the rules until nothing changes (removing one escape code can complete another, a collapse
    marker can sit next to an equal line), so that minifying twice gives the same as once.

    Real output settles in one to three passes. Text built so that each pass uncovers one more escape code
    (ESC ESC ... [m [m) would take a pass per code, quadratic in its length: after MAX_PASSES it is left as
    it came, which minifies to itself again, so the result is still idempotent.
    """
    current = text
    for _ in range(MAX_PASSES):
        new = _step(current, min_repeats)
        if new == current:
            return current
        current = new
    return text


class Minify(Strategy[MinifyParams]):
    """Rewrites only tool results (role tool and legacy function); every rule keeps what the text says."""

    name = "minify"
    params_model = MinifyParams
    summary = (
        "Losslessly clean up tool results: compact JSON, strip ANSI escape codes and trailing whitespace, "
        "collapse runs of repeated lines."
    )

    def _minified(self, message: Message, text: str, *, ctx: Context) -> str:
        repeats = self.params.min_repeats
        if ctx.memo is None:
            new = minify_text(text, repeats)
        else:
            # The message's digest, not the text's: the request's token count has made it already, and hashing
            # megabytes of tool output again was most of this strategy's time on a re-sent history.
            key = b"minify:%d:" % repeats + ctx.digest(message)
            new = ctx.memo.get_or_compute(key, lambda: minify_text(text, repeats))
        # A stub made of the minified text later names this one, which is what the client has.
        ctx.rewrote(new, text)
        return new

    def apply(self, messages: list[Message], ctx: Context) -> Applied:
        out, rewritten = rewrite_tool_results(messages, partial(self._minified, ctx=ctx), ctx.checkpoint)
        return Applied(out, {"rewritten": rewritten})
