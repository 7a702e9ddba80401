"""What the model reads where content was removed. A stub for removed tool output says what went, how big it
was, and how to get it back: its ref and the expand tool (strategies.refs), so what a strategy removes stays
within the model's reach. The ref is the caller's to give: Context.ref_for(text), which names the client's
original also when the text was rewritten first. What reads stubs back (the benchmarks among others) uses the
names exported here (same_as_call) and in strategies.refs (refs_in, stub_refs), never a copy of their text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from .refs import how_to_expand


def _how(ref: str | None, what: str) -> str:
    """The stub's way back: none where the request cannot expand refs (Context.expandable)."""
    return "" if ref is None else f"; {how_to_expand(ref)} to see {what}"


def truncate_middle(text: str, size: int, ref: str | None) -> str:
    """Keep `size` characters (head and tail halves) around a stub for the middle.

    Text that the stub would not make shorter is returned as is.
    """
    n = len(text)
    if n <= size:
        return text
    head, tail = size - size // 2, size // 2
    stub = f"[... {n - size:,} of {n:,} chars elided{_how(ref, 'them all')} ...]"
    shortened = f"{text[:head]}{stub}{text[n - tail :] if tail else ''}"
    return shortened if len(shortened) < n else text


def shorten_arguments(arguments: str, size: int, ref_for: Callable[[str], str | None]) -> str:
    """Truncate the long strings inside JSON arguments (truncate_middle), keeping the arguments valid JSON; arguments
    that are no JSON are returned as they are.
    """
    try:
        data = json.loads(arguments)
    except ValueError:
        return arguments

    def shorten(value: Any) -> Any:
        if isinstance(value, str):
            return truncate_middle(value, size, ref_for(value)) if len(value) > size else value
        if isinstance(value, list):
            return [shorten(v) for v in value]
        if isinstance(value, dict):
            return {k: shorten(v) for k, v in value.items()}
        return value

    shortened = shorten(data)
    return arguments if shortened == data else json.dumps(shortened, ensure_ascii=False)


# --- Each strategy's stub --------------------------------------------------------------------------------------


def pruned(text: str, max_chars: int, ref: str | None) -> str:
    """prune_tool_outputs: the head of a long tool result, then a stub for the rest."""
    stub = f"[... output truncated: {len(text):,} chars in all{_how(ref, 'it')}]"
    return f"{text[:max_chars]}\n{stub}"


def elided(name: str, result: str, ref: str | None, arguments: tuple[str, str | None] | None = None) -> str:
    """mask and clear_tool_uses: what the model reads instead of a tool result (and, with clear_tool_inputs,
    its call's arguments, given as (arguments, their ref)).
    """
    text = f"[{name or 'tool'} output elided: {len(result):,} chars{_how(ref, 'it')}"
    if arguments is not None:
        args, args_ref = arguments
        text += f"; its arguments too: {len(args):,} chars" + ("" if args_ref is None else f', ref="{args_ref}"')
    return text + "]"


_SAME_AS = "[same output as tool call "
# A dedupe pointer (same_as) at the start of a text; group 1: the call whose result it repeats.
SAME_AS_PATTERN = re.compile(re.escape(_SAME_AS) + r"(.+?) above: \d[\d,]* chars")


def same_as(call_id: str, text: str, ref: str | None) -> str:
    """dedupe: a repeated tool result, pointing at its first copy (read back by same_as_call)."""
    return f"{_SAME_AS}{call_id} above: {len(text):,} chars{_how(ref, 'it')}]"


def same_as_call(text: str) -> str | None:
    """The call whose result a dedupe pointer repeats, or None where the text is no such pointer."""
    found = SAME_AS_PATTERN.match(text)
    return found.group(1) if found is not None else None


def repeated(n: int) -> str:
    """minify: N more copies of the line above, collapsed (lossless: the marker says exactly what it stands for)."""
    return f"[previous line repeated {n} time{'' if n == 1 else 's'}]"


def shown_to_the_user(label: str, options: int) -> str:
    """trim_bulky: the long-chat recipe's stub for bulky output the user has seen."""
    return f"[{label} ({options} options) shown to the user; omitted]"


def left_out(tools: Mapping[str, int], others: int, chars: int, ref: str | None) -> str:
    """mask past its limit: the oldest tool calls (and messages between them) left out whole, with the ref of their
    index (strategies.refs.left_out_ref). tools: how many calls of each tool, most first.
    """
    calls = sum(tools.values())
    what = []
    if calls:
        named = ", ".join(f"{name or 'tool'} {count}" for name, count in list(tools.items())[:6])
        more = ", ..." if len(tools) > 6 else ""
        what.append(f"{calls:,} earlier tool call{'s' if calls != 1 else ''} ({named}{more}) with their results")
    if others:
        what.append(f"{others:,} {'other ' if calls else 'earlier '}message{'s' if others != 1 else ''}")
    return f"[{' and '.join(what)}, {chars:,} chars, left out to fit the context window{_how(ref, 'which')}]"


# --- Reading stubs back ------------------------------------------------------------------------------------------

StubKind = Literal["whole", "part", "left_out"]
# Stubs that stand for the whole of what they replace: mask's and clear_tool_uses' (elided), dedupe's (same_as),
# trim_bulky's (shown_to_the_user). Each is the whole text of its message.
_WHOLE = re.compile(
    r"\[[^\n]*? output elided: \d[\d,]* chars"
    + "|"
    + SAME_AS_PATTERN.pattern
    + r"|\[[^\n]+ \(\d+ options\) shown to the user; omitted\]$"
)
# Stubs for a part of a text, which keeps its head (pruned) or its head and tail (truncate_middle).
_PART = re.compile(r"\[\.\.\. \d[\d,]* of \d[\d,]* chars elided|\n\[\.\.\. output truncated: \d[\d,]* chars in all")
_LEFT_OUT = re.compile(r"\[[^\n]*, \d[\d,]* chars, left out to fit the context window")


def stub_kind(text: str) -> StubKind | None:
    """What the stub in a text stands for: "whole" (the text is a stub for all of what it replaced), "part" (a stub
    stands for a part cut out of it), "left_out" (a left_out marker, for messages left out whole), or None (no stub).
    """
    if _LEFT_OUT.match(text):
        return "left_out"
    if _WHOLE.match(text):
        return "whole"
    if _PART.search(text):
        return "part"
    return None
