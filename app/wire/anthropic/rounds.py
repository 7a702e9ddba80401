"""An expand round's assistant turn as the Messages API takes it back, in this request and whenever it is shown again.

In this request (round_turn): the model's blocks as it wrote them, in their order (thinking and redacted_thinking
with their signatures, text, server tool blocks), of its expand calls only the ones the proxy kept. The API wants a
tool loop's turn back exactly as the model produced it, and with interleaved thinking the model may think between
calls, so the turn is carried whole in the view message's WIRE_KEY (BLOCKS) and render writes it back as it is.

On a later request the round is shown again from what was remembered (app.expansion.memory: the calls, never
content), and what the client was shown of the round (every block but the expand calls) it holds itself, at the start
of its next assistant message: the answer it got went on from there. So the round's tag (shown_handles: where those
blocks stood among the calls, and a digest of them) lets render take them back out of that message into the round
(shown_again), and the upstream sees every turn as it produced it: the round with its thinking before its calls, the
client's message with what the model wrote after the results. An expand call's tool_use block is written in one form,
{type, id, name, input}, in this request and every later one, so it is the same bytes whenever the round is shown.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import orjson

from strategies import Message
from strategies.messages import WIRE_KEY
from strategies.refs import EXPAND_TOOL, expand_turn

BLOCKS = "blocks"  # in a round turn's WIRE_KEY: the blocks it goes upstream with
# In the WIRE_KEY of a round shown again on a later request (turn_again): its tag, by which render finds the
# round's own blocks in the client's next message.
SHOWN = "shown"
CARRIED = "text"  # in WIRE_KEY: what the token counter counts as unseen text the model reads (thinking)
THINKING = frozenset({"thinking", "redacted_thinking"})
SHOWN_BLOCK, CALL = "s", "c"  # a tag's pattern: a block the client was shown, an expand call
MAX_TAG_CHARS = 200  # a round of more blocks than this is shown again from its calls alone
_DIGEST_CHARS = 16


def is_expand(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") == EXPAND_TOOL


def is_client_call(block: Any) -> bool:
    """A tool use the client answers: any but the expand tool's (server tools' are the API's own)."""
    return isinstance(block, dict) and block.get("type") == "tool_use" and not is_expand(block)


def arguments(block: dict[str, Any]) -> str:
    """A tool use's input as JSON arguments, as the view writes every call's."""
    return orjson.dumps(block.get("input", {})).decode("utf-8", "surrogatepass")


def call_block(call_id: str, arguments: str, fallback: Any = None) -> dict[str, Any]:
    """An expand call's tool_use block, in the one form the proxy writes it (the API's own field order)."""
    try:
        given = json.loads(arguments)
    except ValueError:
        given = None
    tool_input = given if isinstance(given, dict) else fallback if isinstance(fallback, dict) else {}
    return {"type": "tool_use", "id": call_id, "name": EXPAND_TOOL, "input": tool_input}


def _kept(blocks: Sequence[Any], kept: Sequence[tuple[str, str]]) -> list[Any]:
    """The round's blocks with only the kept expand calls, in the proxy's form. The kept calls are the model's in
    order (app.expansion.allowance), each under the model's id, or an id the proxy made where the model's was unusable.
    """
    out: list[Any] = []
    pending = list(kept)
    for block in blocks:
        if not is_expand(block):
            out.append(block)
        elif pending and (block.get("id") == pending[0][0] or pending[0][0].startswith(f"{EXPAND_TOOL}_")):
            call_id, given = pending.pop(0)
            out.append(call_block(call_id, given, block.get("input")))
    return out


def round_turn(blocks: Sequence[Any], kept: Sequence[tuple[str, str]]) -> Message:
    """The round's assistant message in the view: its parts and kept calls for the strategies and the counter, and
    in WIRE_KEY the blocks it goes upstream with.
    """
    out = _kept(blocks, kept)
    parts = [b for b in out if not is_expand(b)]
    calls = [
        {"id": b["id"], "type": "function", "function": {"name": EXPAND_TOOL, "arguments": arguments(b)}}
        for b in out
        if is_expand(b)
    ]
    wire: dict[str, Any] = {BLOCKS: out}
    thinking = [b["thinking"] for b in parts if _type(b) == "thinking" and isinstance(b.get("thinking"), str)]
    if thinking:
        wire[CARRIED] = "\n".join(thinking)
    return {"role": "assistant", "content": parts, "tool_calls": calls, WIRE_KEY: wire}


def shown_handles(blocks: Sequence[Any], kept: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """The round's handles (ExpandRound.handles): its tag, where the blocks the client was shown stand among the kept
    calls and a digest of them; none when the client was shown nothing of it.
    """
    out = _kept(blocks, kept)
    pattern = "".join(CALL if is_expand(b) else SHOWN_BLOCK for b in out)
    if SHOWN_BLOCK not in pattern:
        return ()
    tag = f"{pattern}:{_digest([b for b in out if not is_expand(b)])}"
    return (tag,) if len(tag) <= MAX_TAG_CHARS else ()


def turn_again(calls: Sequence[tuple[str, str]], handles: tuple[str, ...]) -> Message:
    """A remembered round's turn on a later request (ExpandTool.turn_again): its calls, with its tag for render to
    take back the blocks the client was shown of it (shown_again).
    """
    turn = expand_turn(calls)
    return {**turn, WIRE_KEY: {SHOWN: handles[0]}} if len(handles) == 1 else turn


def _essence(block: Any) -> Any:
    """What a block is, whatever a client adds to or drops from its copy (a breakpoint, a null field)."""
    if not isinstance(block, dict):
        return block
    keys = {
        "thinking": ("type", "thinking", "signature"),
        "redacted_thinking": ("type", "data"),
        "text": ("type", "text"),
    }
    kind = block.get("type")
    wanted = keys.get(kind) if isinstance(kind, str) else None
    if wanted is not None:
        return {k: block.get(k) for k in wanted}
    return {k: v for k, v in block.items() if v is not None and k != "cache_control"}


def _digest(blocks: Sequence[Any]) -> str:
    canonical = orjson.dumps([_essence(b) for b in blocks], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()[:_DIGEST_CHARS]


def tag_of(message: Message) -> str:
    """The tag a round shown again carries (app.expansion.rounds); "" for any other message."""
    wire = message.get(WIRE_KEY)
    tag = wire.get(SHOWN) if isinstance(wire, dict) else None
    return tag if isinstance(tag, str) else ""


def shown_again(message: Message, following: Sequence[Any], offset: int) -> tuple[list[Any], list[int | None], int]:
    """A round shown again, as blocks: its calls (from the view, as strategies left them) with the blocks the client
    was shown back in their places, taken from `following` (the client's next assistant message's blocks) from
    `offset` on, when they are there as they were. Returns the blocks, for each which block of `following` it is
    (None: a call), and how many of `following` it took.
    """
    calls = [
        call_block(str(c.get("id")), _call_arguments(c)) for c in message.get("tool_calls") or [] if isinstance(c, dict)
    ]
    pattern, _, digest = tag_of(message).partition(":")
    wanted = pattern.count(SHOWN_BLOCK)
    taken = list(following[offset : offset + wanted])
    if not wanted or len(taken) < wanted or pattern.count(CALL) != len(calls) or _digest(taken) != digest:
        return list(calls), [None] * len(calls), 0
    blocks: list[Any] = []
    positions: list[int | None] = []
    shown = 0
    for kind in pattern:
        if kind == CALL:
            blocks.append(calls.pop(0))
            positions.append(None)
        else:
            blocks.append(taken[shown])
            positions.append(offset + shown)
            shown += 1
    return blocks, positions, wanted


def _call_arguments(call: dict[str, Any]) -> str:
    function = call.get("function")
    given = function.get("arguments") if isinstance(function, dict) else None
    return given if isinstance(given, str) else "{}"


def _type(block: Any) -> Any:
    return block.get("type") if isinstance(block, dict) else None
