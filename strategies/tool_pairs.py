"""Tool calls and their results, found and removed together so no call or result is ever orphaned."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .base import Message


@dataclass(frozen=True)
class ToolPair:
    """One answered tool call: the assistant message that made it and the message that answers it.

    call_id is None for a legacy `function_call`, which has no id.
    """

    call_index: int
    call_id: str | None
    result_index: int


def tool_calls_of(message: Message) -> list[dict[str, Any]]:
    calls = message.get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def find_pairs(messages: list[Message]) -> list[ToolPair]:
    """Answered calls in the order of their results. Unanswered calls and orphan results are left out.

    Some models reuse ids such as `call_0` every turn, so a result answers the newest unanswered call
    with its id.
    """
    pending: dict[str, int] = {}
    pending_function: int | None = None
    pairs: list[ToolPair] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            for call in tool_calls_of(message):
                if isinstance(call.get("id"), str):
                    pending[call["id"]] = index
            if isinstance(message.get("function_call"), dict):
                pending_function = index
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if isinstance(call_id, str) and call_id in pending:
                pairs.append(ToolPair(pending.pop(call_id), call_id, index))
        elif role == "function" and pending_function is not None:
            pairs.append(ToolPair(pending_function, None, index))
            pending_function = None
    return pairs


def _call_field(message: Message, call_id: str | None, field: str) -> str | None:
    """A string field (name, arguments) of one call of an assistant message; call_id None: function_call."""
    if call_id is None:
        function = message.get("function_call")
    else:
        function = next((c.get("function") for c in tool_calls_of(message) if c.get("id") == call_id), None)
    value = function.get(field) if isinstance(function, dict) else None
    return value if isinstance(value, str) else None


def call_arguments(message: Message, call_id: str | None) -> str | None:
    """The JSON argument string of one call of an assistant message, if it has one."""
    return _call_field(message, call_id, "arguments")


def call_name(message: Message, call_id: str | None) -> str:
    """The function name of one call of an assistant message ('' when it has none)."""
    return _call_field(message, call_id, "name") or ""


def with_arguments(message: Message, arguments: dict[str | None, str]) -> Message:
    """A copy of an assistant message whose calls (by id; None for function_call) get new arguments."""
    new = dict(message)
    if None in arguments and isinstance(message.get("function_call"), dict):
        new["function_call"] = {**message["function_call"], "arguments": arguments[None]}
    if "tool_calls" in message:
        new["tool_calls"] = [
            {**call, "function": {**call["function"], "arguments": arguments[call["id"]]}}
            if isinstance(call, dict) and call.get("id") in arguments and isinstance(call.get("function"), dict)
            else call
            for call in message["tool_calls"]
        ]
    return new


def has_visible_content(message: Message) -> bool:
    content = message.get("content")
    return bool(content) or bool(message.get("refusal")) or bool(message.get("audio"))


def remove_pairs(messages: list[Message], pairs: Iterable[ToolPair]) -> list[Message]:
    """Drop each call with its result; an assistant message left with no content and no calls goes too."""
    results: set[int] = set()
    calls: dict[int, set[str | None]] = {}
    for pair in pairs:
        results.add(pair.result_index)
        calls.setdefault(pair.call_index, set()).add(pair.call_id)
    if not results:
        return list(messages)
    out: list[Message] = []
    for index, message in enumerate(messages):
        if index in results:
            continue
        removed = calls.get(index)
        if removed is None:
            out.append(message)
            continue
        new = dict(message)
        if None in removed:
            new.pop("function_call", None)
        if "tool_calls" in new:
            kept = [c for c in message["tool_calls"] if not (isinstance(c, dict) and c.get("id") in removed)]
            if kept:
                new["tool_calls"] = kept
            else:
                # The API rejects an empty tool_calls list.
                del new["tool_calls"]
        if "tool_calls" in new or "function_call" in new or has_visible_content(new):
            out.append(new)
    return out
