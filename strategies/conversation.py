"""The conversation as the strategies see it: what a message says, who says it, which calls it makes and which
call a result answers. Every strategy reads and rewrites messages through these functions, so a wire format
whose items are mapped to chat messages (app.wire) gets every strategy unchanged; the message's own keys are
read here and nowhere else.

Content is a string, a list of content parts, or absent. A tool call and its result are found and removed
together, so no call or result is ever orphaned.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from typing import Any

from .messages import Message

TOOL_RESULT_ROLES = frozenset({"tool", "function"})
PINNED_ROLES = frozenset({"system", "developer"})


def role(message: Message) -> Any:
    return message.get("role")


def is_user(message: Message) -> bool:
    return message.get("role") == "user"


def is_assistant(message: Message) -> bool:
    return message.get("role") == "assistant"


def is_pinned_role(message: Message) -> bool:
    """System and developer messages: the instructions, forwarded as they came."""
    return message.get("role") in PINNED_ROLES


def makes_calls(message: Message) -> bool:
    """An assistant message that calls tools (or the legacy function_call)."""
    return "tool_calls" in message or "function_call" in message


def is_text_reply(message: Message) -> bool:
    """An assistant message that only says something."""
    return is_assistant(message) and not makes_calls(message)


def message_text(message: Message) -> str:
    """The text the model reads in a message."""
    return text_of(message.get("content"))


def with_message_text(message: Message, new: str) -> Message:
    """A copy of the message whose text is `new`, its content in the shape the client used."""
    return {**message, "content": with_text(message.get("content"), new)}


def rewrite_tool_results(
    messages: list[Message], new_text: Callable[[Message, str], str], checkpoint: Callable[[], None]
) -> tuple[list[Message], int]:
    """The messages with every tool result's text replaced by new_text(message, text) where that differs, and how
    many were rewritten; checkpoint() is called before each (Context.checkpoint).
    """
    out = list(messages)
    rewritten = 0
    for index, message in enumerate(messages):
        if not is_tool_result(message):
            continue
        checkpoint()
        text = message_text(message)
        new = new_text(message, text)
        if new != text:
            out[index] = with_message_text(message, new)
            rewritten += 1
    return out, rewritten


def result_id(message: Message) -> str | None:
    """The call id a `tool` result answers; None for anything else (legacy `function` results have none)."""
    call_id = message.get("tool_call_id")
    return call_id if message.get("role") == "tool" and isinstance(call_id, str) else None


TOOL_RESULT_ROLES = frozenset({"tool", "function"})


def is_tool_result(message: Message) -> bool:
    return message.get("role") in TOOL_RESULT_ROLES


def text_of(content: Any) -> str:
    """The text the model reads: a string as is, the text parts of a part list joined, else ''."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part["text"] for part in content if _is_text_part(part) and isinstance(part.get("text"), str))
    return ""


def _is_text_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "text"


def with_text(content: Any, text: str) -> Any:
    """Content carrying `text` in the shape the client used. In a part list, the first text part takes the
    text (keeping its other keys, such as cache_control) and the other text parts go; other parts stay.
    """
    if not isinstance(content, list):
        return text
    out: list[Any] = []
    for part in content:
        if not _is_text_part(part):
            out.append(part)
        elif not any(_is_text_part(p) for p in out):
            out.append({**part, "text": text})
    return out if any(_is_text_part(p) for p in out) else [{"type": "text", "text": text}, *out]


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


class CallIndex:
    """Looks up one call of an assistant message by its id. A message's calls are indexed the first time one of them
    is looked up, so looking up each of its n parallel calls costs O(n) in all, where scanning the message for each
    would cost O(n^2). One per pass (messages are never mutated, so an index stays right while it lives); a message
    is known by its identity, and held, so its id cannot be reused.
    """

    def __init__(self) -> None:
        self._functions: dict[int, tuple[Message, dict[str, Any]]] = {}
        self._rewritable: dict[int, tuple[Message, dict[str | None, list[dict[str, Any]]]]] = {}

    def function(self, message: Message, call_id: str | None) -> Any:
        """The `function` of the message's first call with this id; call_id None: its function_call."""
        if call_id is None:
            return message.get("function_call")
        seen = self._functions.get(id(message))
        if seen is None or seen[0] is not message:
            functions: dict[str, Any] = {}
            for call in tool_calls_of(message):
                if isinstance(call.get("id"), str):
                    functions.setdefault(call["id"], call.get("function"))
            seen = self._functions[id(message)] = (message, functions)
        return seen[1].get(call_id)

    def arguments(self, message: Message, call_id: str | None) -> str | None:
        """The JSON argument string of one call, if it has one."""
        return _string_field(self.function(message, call_id), "arguments")

    def name(self, message: Message, call_id: str | None) -> str:
        """The function name of one call ('' when it has none)."""
        return _string_field(self.function(message, call_id), "name") or ""

    def rewritten(self, message: Message, call_id: str | None, arguments: str) -> list[tuple[Any, Any]]:
        """What with_arguments(message, {call_id: arguments}) changes: each call it rewrites (the function_call for
        None) before and after. Rewriting several ids changes the calls of each, as these are disjoint.
        """
        seen = self._rewritable.get(id(message))
        if seen is None or seen[0] is not message:
            by_id: dict[str | None, list[dict[str, Any]]] = {}
            calls = message.get("tool_calls")
            for call in calls if isinstance(calls, list) else []:
                if _rewritable(call):
                    by_id.setdefault(call.get("id"), []).append(call)
            seen = self._rewritable[id(message)] = (message, by_id)
        changed = [(call, _with_call_arguments(call, {call_id: arguments})) for call in seen[1].get(call_id, [])]
        function = message.get("function_call")
        if call_id is None and isinstance(function, dict):
            changed.append((function, {**function, "arguments": arguments}))
        return changed


def _string_field(function: Any, field: str) -> str | None:
    value = function.get(field) if isinstance(function, dict) else None
    return value if isinstance(value, str) else None


def call_arguments(message: Message, call_id: str | None) -> str | None:
    """The JSON argument string of one call of an assistant message, if it has one (in a loop: CallIndex)."""
    return CallIndex().arguments(message, call_id)


def arguments_of(message: Message) -> list[str]:
    """The JSON argument strings of every call an assistant message makes (tool_calls and function_call)."""
    found = [call_arguments(message, None)] if isinstance(message.get("function_call"), dict) else []
    for call in tool_calls_of(message):
        function = call.get("function")
        found.append(function.get("arguments") if isinstance(function, dict) else None)
    return [arguments for arguments in found if isinstance(arguments, str)]


def call_name(message: Message, call_id: str | None) -> str:
    """The function name of one call of an assistant message ('' when it has none; in a loop: CallIndex)."""
    return CallIndex().name(message, call_id)


def _rewritable(call: Any) -> bool:
    """A call with_arguments can give new arguments: a dict with a `function`, whose id is a string. A call with no id
    is not the function_call that the key None names, and any other id is no key (an unhashable one used to raise
    TypeError).
    """
    return isinstance(call, dict) and isinstance(call.get("function"), dict) and isinstance(call.get("id"), str)


def _with_call_arguments(call: Any, arguments: dict[str | None, str]) -> Any:
    if _rewritable(call) and call.get("id") in arguments:
        return {**call, "function": {**call["function"], "arguments": arguments[call.get("id")]}}
    return call


def _id_in(call: dict[str, Any], ids: Container[str | None]) -> bool:
    """Whether a tool call's id is one of ids. Only a string id is: a client's list there is unhashable, and a call
    with none is not the function_call that ids name by None.
    """
    call_id = call.get("id")
    return isinstance(call_id, str) and call_id in ids


def with_arguments(message: Message, arguments: dict[str | None, str]) -> Message:
    """A copy of an assistant message whose calls (by id; None for function_call) get new arguments."""
    new = dict(message)
    if None in arguments and isinstance(message.get("function_call"), dict):
        new["function_call"] = {**message["function_call"], "arguments": arguments[None]}
    if isinstance(message.get("tool_calls"), list):
        new["tool_calls"] = [_with_call_arguments(call, arguments) for call in message["tool_calls"]]
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
            kept = [c for c in message["tool_calls"] if not (isinstance(c, dict) and _id_in(c, removed))]
            if kept:
                new["tool_calls"] = kept
            else:
                # The API rejects an empty tool_calls list.
                del new["tool_calls"]
        if "tool_calls" in new or "function_call" in new or has_visible_content(new):
            out.append(new)
    return out
