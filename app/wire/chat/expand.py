"""The expand tool in chat completions: a function tool offered in `tools`, its calls found in an answer (whole or
streamed), and the answer the client gets without them.

Only choice 0 is read: the tool is not offered when a request asks for n > 1 choices.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from app.wire.base import ExpandAnswer, ExpandStream, ModelCall, Parsed
from strategies import Message
from strategies.refs import EXPAND_DESCRIPTION, EXPAND_PARAMETERS, EXPAND_TOOL, expand_turn

TOOL: dict[str, Any] = {
    "type": "function",
    "function": {"name": EXPAND_TOOL, "description": EXPAND_DESCRIPTION, "parameters": EXPAND_PARAMETERS},
}


def is_expand(call: Any) -> bool:
    function = call.get("function") if isinstance(call, dict) else None
    return isinstance(function, dict) and function.get("name") == EXPAND_TOOL


def add_usage(total: dict[str, Any] | None, usage: Any) -> dict[str, Any] | None:
    """Usage summed over rounds, nested counts (prompt_tokens_details, ...) included."""
    if not isinstance(usage, dict):
        return total
    if total is None:
        return usage
    out = dict(total)
    for key, value in usage.items():
        if isinstance(value, int) and not isinstance(value, bool) and isinstance(out.get(key), int):
            out[key] = out[key] + value
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = add_usage(out[key], value)
        elif key not in out:
            out[key] = value
    return out


@dataclass
class Answer:
    """One round's whole (non-streamed) answer, read."""

    body: dict[str, Any]

    def expand_calls(self) -> list[ModelCall]:
        return [(c.get("id"), _arguments(c)) for c in self._calls() if is_expand(c)]

    def other_calls(self) -> bool:
        return any(not is_expand(c) for c in self._calls())

    def turn(self, kept: Sequence[tuple[str, str]]) -> Message:
        return _turn(kept)

    def handles(self, kept: Sequence[tuple[str, str]]) -> tuple[str, ...]:
        return ()  # the calls are all chat's turn holds

    def for_client(self, usage: dict[str, Any] | None) -> dict[str, Any]:
        """The answer without expand calls, with the usage of every round."""
        body = dict(self.body)
        choices = body.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            choice = dict(choices[0])
            message = choice.get("message")
            if isinstance(message, dict) and any(is_expand(c) for c in self._calls()):
                kept = [c for c in self._calls() if not is_expand(c)]
                message = {k: v for k, v in message.items() if k != "tool_calls"} | (
                    {"tool_calls": kept} if kept else {}
                )
                choice["message"] = message
                if not kept and choice.get("finish_reason") == "tool_calls":
                    choice["finish_reason"] = "stop"
            body["choices"] = [choice, *choices[1:]]
        if usage is not None:
            body["usage"] = usage
        return body

    def _calls(self) -> list[Any]:
        choices = self.body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return []
        message = choices[0].get("message")
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def _arguments(call: dict[str, Any]) -> str:
    arguments = call["function"].get("arguments")
    return arguments if isinstance(arguments, str) else ""


@dataclass
class _StreamedCall:
    expand: bool
    client_index: int | None
    call_id: Any = None
    arguments: list[str] = field(default_factory=list)


class StreamedRound:
    """One round's SSE answer, chunk by chunk: what to pass to the client now, and what the round called.

    Content deltas pass as they come. A tool call's deltas are told apart by its name, which comes in its first
    delta: the client's pass (renumbered so the client's indices run 0, 1, ... as if expand calls were never
    made), the expand tool's are held. The finish chunk and the usage chunk are held until the round is over (the
    latest of each): an internal round's never reach the client, the final round's carry the usage of every round.
    Usage on a content chunk (vLLM's continuous_usage_stats) passes with it, the earlier rounds' usage added. After
    the first round, the chunks take the first round's id, and no second `role` delta is sent.
    """

    def __init__(self, first_id: str | None, before: dict[str, Any] | None = None) -> None:
        self.first_id = first_id  # None: this is the first round
        self.before = before  # the usage of the rounds before this one
        self.id: str | None = first_id
        self.calls: dict[Any, _StreamedCall] = {}
        # Only the final round's calls reach the client (a round with one of its calls is final).
        self.next_client_index = 0
        self.held: dict[str, dict[str, Any]] = {}  # "finish", "usage": the latest of each, in order of arrival
        self.usage: dict[str, Any] | None = None  # this round's, the latest reported
        self.done = False

    def feed(self, event: bytes) -> bytes | None:
        """One SSE event as received (without its blank line); the bytes to send the client now, if any."""
        data = _data(event)
        if data is None:
            return event + b"\n\n"  # a comment or a field the proxy does not read: as it came
        if data == b"[DONE]":
            self.done = True
            return None
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return event + b"\n\n"
        if not isinstance(chunk, dict) or "error" in chunk:
            return event + b"\n\n"
        if self.id is None and isinstance(chunk.get("id"), str):
            self.id = chunk["id"]
        out, changed = self._route(chunk)
        if out is None:
            return None
        if not changed and self.first_id is None:
            return event + b"\n\n"  # byte for byte
        return _event(out)

    def _route(self, chunk: dict[str, Any]) -> tuple[dict[str, Any] | None, bool]:
        changed = False
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        choices = chunk.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        if choice is None:
            if usage is not None:  # the usage chunk (choices: [])
                self.held["usage"] = chunk
                return None, True
            return self._retag(chunk)
        found = choice.get("delta")
        delta: dict[str, Any] = found if isinstance(found, dict) else {}
        new_delta = dict(delta)
        if isinstance(delta.get("tool_calls"), list):
            passed = [c for c in (self._call_delta(d) for d in delta["tool_calls"]) if c is not None]
            changed = passed != delta["tool_calls"]
            if passed:
                new_delta["tool_calls"] = passed
            else:
                new_delta.pop("tool_calls")
        if self.first_id is not None and "role" in new_delta:
            new_delta.pop("role")
            changed = True
        assert isinstance(choices, list)
        if choice.get("finish_reason") is not None:
            # Held without its delta, which passes now: an internal round's finish chunk is dropped, its text not.
            self.held["finish"] = {**chunk, "choices": [{**choice, "delta": {}}, *choices[1:]]}
            if not new_delta:
                return None, True
            chunk = {k: v for k, v in chunk.items() if k != "usage"}
            choice = {**choice, "finish_reason": None}
            changed = True
        elif not new_delta and delta:
            return None, True  # it carried only expand-call deltas
        elif isinstance(usage, dict) and self.before is not None:
            chunk = {**chunk, "usage": add_usage(self.before, usage)}
            changed = True
        out = {**chunk, "choices": [{**choice, "delta": new_delta}, *choices[1:]]}
        retagged, retag_changed = self._retag(out)
        return retagged, changed or retag_changed

    def _retag(self, chunk: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        if self.first_id is None or chunk.get("id") == self.first_id:
            return chunk, False
        return {**chunk, "id": self.first_id}, True

    def _call_delta(self, delta: Any) -> Any:
        if not isinstance(delta, dict):
            return delta
        index = delta.get("index")
        call = self.calls.get(index)
        if call is None:
            expand = is_expand(delta)
            call = _StreamedCall(expand, None if expand else self.next_client_index)
            if not expand:
                self.next_client_index += 1
            self.calls[index] = call
        if call.expand:
            if delta.get("id") is not None:
                call.call_id = delta["id"]
            function = delta.get("function")
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                call.arguments.append(function["arguments"])
            return None
        return delta if delta.get("index") == call.client_index else {**delta, "index": call.client_index}

    def expand_calls(self) -> list[ModelCall]:
        return [(c.call_id, "".join(c.arguments)) for c in self.calls.values() if c.expand]

    def other_calls(self) -> bool:
        return any(not c.expand for c in self.calls.values())

    def turn(self, kept: Sequence[tuple[str, str]]) -> Message:
        return _turn(kept)

    def handles(self, kept: Sequence[tuple[str, str]]) -> tuple[str, ...]:
        return ()

    def finish(self, usage: dict[str, Any] | None) -> Iterator[bytes]:
        """The held chunks of the final round, with the usage of every round, then [DONE]."""
        had_expand = any(c.expand for c in self.calls.values())
        for chunk in self.held.values():
            if chunk.get("usage") is not None and usage is not None:
                chunk = {**chunk, "usage": usage}
            choices = chunk.get("choices")
            if had_expand and not self.next_client_index and isinstance(choices, list) and choices:
                choice = choices[0]
                if isinstance(choice, dict) and choice.get("finish_reason") == "tool_calls":
                    chunk = {**chunk, "choices": [{**choice, "finish_reason": "stop"}, *choices[1:]]}
            yield _event(self._retag(chunk)[0])
        yield b"data: [DONE]\n\n"


def _turn(kept: Sequence[tuple[str, str]]) -> Message:
    """The round's assistant message as chat sends it back: the kept expand calls, no text (the same bytes whenever
    the round is shown again, app.expansion.rounds).
    """
    return expand_turn(kept)


def _data(event: bytes) -> bytes | None:
    """The data of an event that is one `data:` line (all chat completion events are), else None."""
    lines = event.splitlines()
    if len(lines) != 1 or not lines[0].startswith(b"data:"):
        return None
    return lines[0][5:].strip()


def _event(chunk: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


class ChatExpandTool:
    """The expand tool as chat completions carry it (wire.base.ExpandTool)."""

    definition = TOOL

    def offer(self, parsed: Parsed) -> Parsed | None:
        """The request with the expand tool after the client's own, or None when it cannot take it: n > 1 choices,
        legacy `functions` (which cannot be mixed with tools), or a client tool of the same name (whose calls are the
        client's to answer). tool_choice and parallel_tool_calls stay as the client sent them.
        """
        body = parsed.body
        tools = body.get("tools")
        if body.get("n") not in (None, 1) or "functions" in body or not isinstance(tools, list | None):
            return None
        if any(
            isinstance(t, dict) and isinstance(t.get("function"), dict) and t["function"].get("name") == EXPAND_TOOL
            for t in tools or ()
        ):
            return None
        offered = {**body, "tools": [*(tools or ()), TOOL]}
        return Parsed(
            offered, parsed.messages, parsed.model, {**parsed.request, "tools": offered["tools"]}, parsed.stdlib
        )

    def answer(self, body: dict[str, Any], after: ExpandAnswer | None) -> Answer:
        return Answer(body)  # the client gets the last round's message: earlier rounds' text is not shown

    def stream(self, after: ExpandStream | None, before: dict[str, Any] | None) -> StreamedRound:
        assert after is None or isinstance(after, StreamedRound), "stream takes this format's readers"
        return StreamedRound(None if after is None else after.first_id or after.id, before)

    def add_usage(self, total: dict[str, Any] | None, usage: Any) -> dict[str, Any] | None:
        return add_usage(total, usage)

    def turn_again(self, calls: Sequence[tuple[str, str]], handles: tuple[str, ...]) -> Message:
        return _turn(calls)
