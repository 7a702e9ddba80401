"""One round of a Messages stream, event by event: what the client is sent now, and what the round called.

The client reads one message across the rounds, in Anthropic's grammar: one `message_start` (the first round's),
content blocks numbered 0, 1, 2, ... on through the rounds without a gap (the SDKs index the message's content by
them), one `message_delta` (the final round's, with the usage of every round and the stop_reason fixed where no call
of the client's is left) and one `message_stop`. A block passes as it comes (start, deltas, stop); an expand call's
is known by its start, which names the tool, and is held back whole. `ping` and `error` pass; a later round's
`message_start` and an internal round's `message_delta` and `message_stop` never reach the client. What no
renumbering changed (a first round without an expand call, say) passes byte for byte.

The round's blocks are put together as the SDKs do (text and thinking deltas appended, the signature set, a tool's
input from its JSON deltas), so the round's turn goes back upstream as the model wrote it (wire.anthropic.rounds).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, TypeGuard

import orjson

from app.wire.anthropic.rounds import arguments, is_client_call, is_expand, round_turn, shown_handles
from app.wire.base import ModelCall
from strategies import Message


class StreamedRound:
    """after: the previous round's reader (None: this is the first round), whose block numbering this one goes on
    with; before: the usage of the rounds before it, which no event of a round carries (the final message_delta gets
    the sum of every round's, finish).
    """

    def __init__(self, after: StreamedRound | None, before: dict[str, Any] | None = None) -> None:
        self.first = after is None
        self.next_index: int = after.next_index if after is not None else 0
        self.indices: dict[int, int | None] = {}  # the upstream's block index -> the client's (None: held back)
        self.blocks: dict[int, dict[str, Any]] = {}  # the round's blocks as their starts gave them
        # What deltas add to a block: (index, field) -> the pieces, joined when the round's blocks are read (text,
        # thinking; a tool's input JSON under "input").
        self.pieces: dict[tuple[int, str], list[str]] = {}
        self.stop_reason: Any = None
        self.started: dict[str, Any] = {}  # message_start's usage
        self.usage: dict[str, Any] | None = None  # this round's, as last reported
        self.held: dict[str, tuple[bytes, str, dict[str, Any]]] = {}  # message_delta, message_stop: raw, name, data

    def feed(self, event: bytes) -> bytes | None:
        parsed = _parse(event)
        if parsed is None:
            return event + b"\n\n"  # a comment, or what the proxy does not read: as it came
        name, data = parsed
        kind = data.get("type", name)
        if kind == "message_start":
            message = data.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            self.started = dict(usage) if isinstance(usage, dict) else {}
            self.usage = dict(self.started)
            return event + b"\n\n" if self.first else None
        if kind == "message_delta":
            self._delta(data)
            self.held["delta"] = (event, name, data)
            return None
        if kind == "message_stop":
            self.held["stop"] = (event, name, data)
            return None
        index = data.get("index")
        if kind not in ("content_block_start", "content_block_delta", "content_block_stop") or not _index(index):
            return event + b"\n\n"  # ping, error, and any event the proxy does not know
        if kind == "content_block_start":
            self._start(index, data.get("content_block"))
        elif kind == "content_block_delta":
            self._add(index, data.get("delta"))
        client = self.indices.get(index, index)
        if client is None:
            return None  # an expand call's
        if client == index and self.first:
            return event + b"\n\n"
        return _event(name, {**data, "index": client})

    def _start(self, index: int, block: Any) -> None:
        block = dict(block) if isinstance(block, dict) else {}
        self.blocks[index] = block
        if is_expand(block):
            self.indices[index] = None
        else:
            self.indices[index] = self.next_index
            self.next_index += 1

    def _add(self, index: int, delta: Any) -> None:
        block = self.blocks.get(index)
        if block is None or not isinstance(delta, dict):
            return
        kind = delta.get("type")
        added = _ADDED.get(kind) if isinstance(kind, str) else None
        if added is not None and isinstance(delta.get(added[0]), str):
            self.pieces.setdefault((index, added[1]), []).append(delta[added[0]])
        elif kind == "signature_delta" and isinstance(delta.get("signature"), str):
            block["signature"] = delta["signature"]
        elif kind == "citations_delta" and "citation" in delta:
            block["citations"] = [*(block.get("citations") or ()), delta["citation"]]

    def _delta(self, data: dict[str, Any]) -> None:
        delta = data.get("delta")
        if isinstance(delta, dict):
            self.stop_reason = delta.get("stop_reason")
        usage = data.get("usage")
        if isinstance(usage, dict):
            # Counts on a message_delta are the round's totals so far: they replace message_start's.
            self.usage = {**self.started, **{k: v for k, v in usage.items() if v is not None}}

    def _round(self) -> list[dict[str, Any]]:
        """The round's blocks in order, as the model wrote them: deltas added, each tool's input read from its JSON."""
        out = []
        for index in sorted(self.blocks):
            block = dict(self.blocks[index])
            for name in ("text", "thinking"):
                if (index, name) in self.pieces:
                    block[name] = str(block.get(name) or "") + "".join(self.pieces[index, name])
            given = self._input(index)
            out.append({**block, "input": given} if isinstance(given, dict) else block)
        return out

    def _input(self, index: int) -> Any:
        """A tool block's input from its JSON deltas; None where it has none, or they are no JSON."""
        text = "".join(self.pieces.get((index, "input"), ()))
        try:
            return orjson.loads(text) if text.strip() else None
        except orjson.JSONDecodeError:
            return None

    def expand_calls(self) -> list[ModelCall]:
        if self.stop_reason != "tool_use":
            return []
        return [(b.get("id"), self._arguments(i, b)) for i, b in sorted(self.blocks.items()) if is_expand(b)]

    def _arguments(self, index: int, block: dict[str, Any]) -> str:
        text = "".join(self.pieces.get((index, "input"), ()))
        if not text.strip():
            return arguments(block)
        given = self._input(index)
        return text if given is None else arguments({"input": given})  # not JSON: answered with a tool error

    def other_calls(self) -> bool:
        return any(is_client_call(b) for b in self.blocks.values())

    def turn(self, kept: Sequence[tuple[str, str]]) -> Message:
        return round_turn(self._round(), kept)

    def handles(self, kept: Sequence[tuple[str, str]]) -> tuple[str, ...]:
        return shown_handles(self._round(), kept)

    def finish(self, usage: dict[str, Any] | None) -> Iterator[bytes]:
        """The final round's message_delta, with the usage of every round (None: as it came) and its stop_reason
        fixed where it stopped for tools and none of the client's is left; then its message_stop.
        """
        if "delta" in self.held:
            raw, name, data = self.held["delta"]
            fixed = dict(data)
            delta = data.get("delta")
            dropped = any(is_expand(b) for b in self.blocks.values())
            if dropped and self.stop_reason == "tool_use" and not self.other_calls() and isinstance(delta, dict):
                fixed["delta"] = {**delta, "stop_reason": "end_turn"}
            if usage is not None:
                fixed["usage"] = usage
            yield raw + b"\n\n" if fixed == data else _event(name, fixed)
        if "stop" in self.held:
            yield self.held["stop"][0] + b"\n\n"


# A delta that adds to its block: its type -> (the delta's field, the block's field it adds to).
_ADDED = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "input_json_delta": ("partial_json", "input"),
}


def _index(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse(event: bytes) -> tuple[str, dict[str, Any]] | None:
    """An event's name and its data object; None for one that is no JSON object."""
    name = ""
    data: list[bytes] = []
    for line in event.splitlines():
        if line.startswith(b"event:"):
            name = line[6:].strip().decode("utf-8", "replace")
        elif line.startswith(b"data:"):
            data.append(line[5:].removeprefix(b" "))
    if not data:
        return None
    try:
        parsed = orjson.loads(b"\n".join(data))
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parsed, dict):
        return None
    return name or str(parsed.get("type", "")), parsed


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
