"""Checks of design.md's invariants, shared by the property tests and the benchmarks."""

from __future__ import annotations

from .conversation import has_visible_content, tool_calls_of
from .digests import message_bytes
from .messages import Message


def pairing_problems(messages: list[Message]) -> list[str]:
    """Where a conversation breaks OpenAI's tool-call rules: each assistant message's calls answered by
    the tool messages right after it, and no tool message answering anything else.
    """
    problems: list[str] = []
    open_ids: set[str] = set()
    open_at = -1
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id in open_ids:
                open_ids.discard(call_id)
            else:
                problems.append(f"message {index}: tool result {call_id!r} answers no open call")
            continue
        if open_ids:
            problems.append(f"message {open_at}: calls {sorted(open_ids)} have no result")
            open_ids = set()
        if role == "assistant":
            calls = tool_calls_of(message)
            if "tool_calls" in message and not calls:
                problems.append(f"message {index}: empty tool_calls")
            open_ids = {c["id"] for c in calls if isinstance(c.get("id"), str)}
            open_at = index
            if not calls and "function_call" not in message and not has_visible_content(message):
                problems.append(f"message {index}: assistant message with no content and no calls")
    if open_ids:
        problems.append(f"message {open_at}: calls {sorted(open_ids)} have no result")
    return problems


def pinned_indices(messages: list[Message]) -> list[int]:
    """System and developer messages, the first and the last user message."""
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    pinned = {i for i, m in enumerate(messages) if m.get("role") in ("system", "developer")}
    pinned.update(users[:1] + users[-1:])
    return sorted(pinned)


def compaction_problems(before: list[Message], after: list[Message]) -> list[str]:
    """What a compaction broke: pairing that was valid, or a pinned message not forwarded unchanged."""
    problems = pairing_problems(after) if not pairing_problems(before) else []
    forwarded = iter([message_bytes(m) for m in after])
    for index in pinned_indices(before):
        # Consuming the iterator checks order as well as presence, byte for byte.
        if message_bytes(before[index]) not in forwarded:
            problems.append(f"pinned message {index} ({before[index].get('role')}) changed, moved or dropped")
            forwarded = iter([message_bytes(m) for m in after])
    return problems
