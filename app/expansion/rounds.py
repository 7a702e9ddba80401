"""An expand round as the model sees it: the assistant's calls of the expand tool and their results, made the
same way, byte for byte, when the proxy answers them and whenever a later request shows them again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.wire.base import SHOWN
from strategies import Message
from strategies.messages import WIRE_KEY
from strategies.refs import EXPAND_TOOL, ExpandCall, Originals, expand, expand_turn

# What a model's tool-call id may be for the proxy to reuse it (Anthropic's own rule, the strictest).
_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
MAX_ID_CHARS = 64


@dataclass(frozen=True)
class Round:
    """One round the proxy answered: where it happened and the calls made, never any content.

    at: the client's messages it followed; anchor: their prefix digest (hex), so it is shown again only after
    those same messages; calls: (call id, arguments as ExpandCall.arguments writes them); shown: the wire format's
    tag for what of the round the client was shown (ExpandRound.shown; "" for none).
    """

    at: int
    anchor: str
    calls: tuple[tuple[str, str], ...]
    shown: str = ""


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
    calls: Sequence[tuple[str, str]], originals: Originals, max_chars: int, shown: str = ""
) -> list[Message]:
    """The assistant message with the calls, then one tool result per call, from this request's originals. shown:
    the round's tag (Round.shown), which the assistant message carries for the wire format to render it by.
    """
    turn, *results = answered_round(calls, [result_of(arguments, originals, max_chars) for _, arguments in calls])
    return [{**turn, WIRE_KEY: {SHOWN: shown}} if shown else turn, *results]


def answered_round(calls: Sequence[tuple[str, str]], results: Sequence[str]) -> list[Message]:
    """The assistant message with the calls, then each call's result as given."""
    return [expand_turn(calls), *tool_results(calls, results)]


def tool_results(calls: Sequence[tuple[str, str]], results: Sequence[str]) -> list[Message]:
    """Each call's result as a tool message."""
    return [
        {"role": "tool", "tool_call_id": cid, "content": text} for (cid, _), text in zip(calls, results, strict=True)
    ]


def with_rounds(
    original: list[Message], prefixes: Sequence[bytes], rounds: Sequence[Round], originals: Originals, max_chars: int
) -> list[Message]:
    """The client's messages with the remembered rounds back at their places: each after the `at` messages it
    followed, when they are still the same (prefixes: the prefix digest of each of the client's messages) and the
    conversation went on past them. A retry of the very request that had the round gets none: it is asked anew.
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
        out.extend(round_messages(r.calls, originals, max_chars, r.shown))
    out.extend(original[start:])
    return out
