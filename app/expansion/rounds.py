"""An expand round as the model sees it: the assistant's calls of the expand tool and their results, made the
same way, byte for byte, when the proxy answers them and whenever a later request shows them again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from strategies import Message
from strategies.refs import EXPAND_TOOL, ExpandCall, Originals, expand, expand_turn

# What a model's tool-call id may be for the proxy to reuse it (Anthropic's own rule, the strictest).
_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
MAX_ID_CHARS = 64


@dataclass(frozen=True)
class Round:
    """One round the proxy answered: where it happened and the calls made, never any content.

    at: the client's messages it followed; anchor: their prefix digest (hex), so it is shown again only after
    those same messages; calls: (call id, arguments as ExpandCall.arguments writes them); handles: what the wire
    format kept to show its turn again as it went (ExpandRound.handles: ids of the API's own items, never content).
    """

    at: int
    anchor: str
    calls: tuple[tuple[str, str], ...]
    handles: tuple[str, ...] = ()


# A remembered round's turn as its wire format shows it again (ExpandTool.turn_again): from its calls and handles.
TurnAgain = Callable[[Sequence[tuple[str, str]], tuple[str, ...]], Message]


def view_turn(calls: Sequence[tuple[str, str]], handles: tuple[str, ...]) -> Message:
    """The turn as the conversation view has it, which chat completions sends as it is."""
    return expand_turn(calls)


def call_id(model_id: object, ref: str, index: int) -> str:
    """The model's id when every API accepts it, else one made from the ref (the model never needs its own)."""
    if isinstance(model_id, str) and 0 < len(model_id) <= MAX_ID_CHARS and set(model_id) <= _ID_CHARS:
        return model_id
    return f"{EXPAND_TOOL}_{ref[:16]}_{index}"


def result_of(arguments: str, originals: Originals, max_chars: int) -> str:
    """What one expand call returns, from this request's originals (an error text for bad arguments)."""
    call = ExpandCall.parse(arguments)
    return call if isinstance(call, str) else expand(originals, call, max_chars)


def round_messages(
    calls: Sequence[tuple[str, str]], originals: Originals, max_chars: int, turn: Message | None = None
) -> list[Message]:
    """The assistant message with the calls (turn: the wire format's, else the view's), then one tool result per
    call, from this request's originals.
    """
    results = [result_of(arguments, originals, max_chars) for _, arguments in calls]
    return [turn if turn is not None else expand_turn(calls), *tool_results(calls, results)]


def tool_results(calls: Sequence[tuple[str, str]], results: Sequence[str]) -> list[Message]:
    """Each call's result as a tool message."""
    return [
        {"role": "tool", "tool_call_id": cid, "content": text} for (cid, _), text in zip(calls, results, strict=True)
    ]


def with_rounds(
    original: list[Message],
    prefixes: Sequence[bytes],
    rounds: Sequence[Round],
    originals: Originals,
    max_chars: int,
    turn: TurnAgain = view_turn,
) -> list[Message]:
    """The client's messages with the remembered rounds back at their places: each after the `at` messages it
    followed, when they are still the same (prefixes: the prefix digest of each of the client's messages) and the
    conversation went on past them. A retry of the very request that had the round gets none: it is asked anew.
    turn: each round's assistant turn as the request's wire format shows it again.
    """
    placed = sorted(
        (r for r in rounds if 0 < r.at < len(original) and prefixes[r.at - 1].hex() == r.anchor),
        key=lambda r: r.at,
    )
    if not placed:
        return original
    out: list[Message] = []
    start = 0
    for r in placed:
        out.extend(original[start : r.at])
        start = r.at
        out.extend(round_messages(r.calls, originals, max_chars, turn(r.calls, r.handles)))
    out.extend(original[start:])
    return out
