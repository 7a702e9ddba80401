"""The corpora's conversations in each wire format's form, so one replay measures every format the proxy serves.

FORMS names each form's wire format (app.wire); ENCODERS turns a chat conversation into a body of that form. The
Messages form is what an agent loop on Claude sends, Claude Code's shape: `system` as text blocks, every assistant
turn that calls tools opened by a signed thinking block, the tool results of a turn in one user message, and
cache_control on the last system block and on the last block of the last message. messages_problems checks what
compaction must keep of such a body.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import orjson

from app.wire import AnthropicMessages, ChatCompletions, WireFormat
from app.wire.cache_control import MAX_BREAKPOINTS, marker
from strategies import Message
from strategies.conversation import text_of

FORMS: dict[str, WireFormat] = {"chat": ChatCompletions(), "messages": AnthropicMessages()}
EPHEMERAL = {"type": "ephemeral"}


def chat_body(messages: list[Message], request: dict[str, Any]) -> bytes:
    return orjson.dumps({**request, "messages": messages})


def _thinking(call_ids: list[str]) -> dict[str, Any]:
    thinking = "Next: " + ", ".join(call_ids) + "."
    return {"type": "thinking", "thinking": thinking, "signature": hashlib.sha256(thinking.encode()).hexdigest()}


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        arguments = None
    tool_input = arguments if isinstance(arguments, dict) else {"arguments": function.get("arguments")}
    return {"type": "tool_use", "id": call["id"], "name": function.get("name") or "tool", "input": tool_input}


def _blocks(content: Any) -> list[dict[str, Any]]:
    text = content if isinstance(content, str) else text_of(content)
    return [{"type": "text", "text": text}] if text else []


def messages_body(messages: list[Message], request: dict[str, Any]) -> bytes:
    """A chat conversation (system, user, assistant with tool_calls, tool results) in Claude Code's Messages shape."""
    system = [block for m in messages if m.get("role") in ("system", "developer") for block in _blocks(m["content"])]
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            continue
        if role == "assistant":
            calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict) and "id" in c]
            head = [_thinking([c["id"] for c in calls])] if calls else []
            blocks = [*head, *_blocks(message.get("content")), *(_tool_use(c) for c in calls)]
            turn_role = "assistant"
        elif role == "tool":
            result = text_of(message.get("content")) if not isinstance(message.get("content"), str) else None
            content = message["content"] if result is None else result
            blocks = [{"type": "tool_result", "tool_use_id": message.get("tool_call_id"), "content": content}]
            turn_role = "user"
        else:
            content = message.get("content")
            blocks = _blocks(content) if content else [{"type": "text", "text": "(empty)"}]
            turn_role = "user"
        if not blocks:
            continue
        if turns and turns[-1]["role"] == turn_role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": turn_role, "content": blocks})
    if system:
        system[-1] = {**system[-1], "cache_control": EPHEMERAL}
    if turns:
        last = turns[-1]["content"]
        last[-1] = {**last[-1], "cache_control": EPHEMERAL}
    body: dict[str, Any] = {"model": request.get("model", "claude-sonnet-4-5"), "max_tokens": 8192}
    if system:
        body["system"] = system
    tools = [_tool_definition(t) for t in request.get("tools") or []]
    if tools:
        body["tools"] = tools
    return orjson.dumps({**body, "messages": turns})


def _tool_definition(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function") or tool
    schema = function.get("parameters") or {"type": "object", "properties": {}}
    return {
        "name": function.get("name", "tool"),
        "description": function.get("description", ""),
        "input_schema": schema,
    }


ENCODERS: dict[str, Callable[[list[Message], dict[str, Any]], bytes]] = {"chat": chat_body, "messages": messages_body}


def messages_problems(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What a compacted Messages body broke: a tool use without its result in the next user message or a result
    without its use; a thinking block not as it came; the latest assistant turn not whole; `system` or a system
    message changed; more than 4 breakpoints; user and assistant not alternating; the first message changed.
    """
    problems: list[str] = []
    sent = after.get("messages", [])
    originals = {
        _key(b) for m in before.get("messages", []) if isinstance(m.get("content"), list) for b in m["content"]
    }
    open_uses: set[Any] = set()
    previous = None
    for index, message in enumerate(sent):
        role = message.get("role")
        blocks = message.get("content") if isinstance(message.get("content"), list) else []
        results = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
        if role == "user" and results - open_uses:
            problems.append(f"message {index}: tool results {sorted(map(str, results - open_uses))} answer no use")
        if role != "system" and open_uses - results:
            problems.append(f"message {index}: tool uses {sorted(map(str, open_uses - results))} have no result")
        open_uses = {b.get("id") for b in blocks if b.get("type") == "tool_use"} if role == "assistant" else set()
        if role == previous:  # a system message (the mid-conversation beta) stands between turns
            problems.append(f"message {index}: two {role} messages in a row")
        previous = role
        for block in blocks:
            if block.get("type") in ("thinking", "redacted_thinking") and _key(block) not in originals:
                problems.append(f"message {index}: a thinking block that is not the client's")
    if open_uses:
        problems.append(f"the last message's tool uses {sorted(map(str, open_uses))} have no result")
    problems += _kept_problems(before, after)
    breakpoints = _breakpoints(after)
    if breakpoints > MAX_BREAKPOINTS:
        problems.append(f"{breakpoints} cache breakpoints")
    return problems


def _kept_problems(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    problems = []
    if after.get("system") != before.get("system") and _breakpoints(before) <= MAX_BREAKPOINTS:
        problems.append("system changed")
    originals, sent = before.get("messages", []), after.get("messages", [])
    keys = [_key(m) for m in sent]
    for index, message in enumerate(originals):
        if message.get("role") == "system" and _key(message) not in keys:
            problems.append(f"system message {index} changed or dropped")
    # A message goes whole if its blocks go in a run, as they came but for a breakpoint that moved onto one: a
    # neighbour that lost what stood between them may share its turn (the API would read them as one anyway).
    runs = [bare_run(m) for m in sent]
    latest = next((m for m in reversed(originals) if m.get("role") == "assistant"), None)
    if latest is not None and not any(bare_run(latest) in run for run in runs):
        problems.append("the latest assistant turn is not whole")
    if originals and sent and not runs[0].startswith(bare_run(originals[0])):
        problems.append("the first message changed")
    return problems


def bare_run(message: dict[str, Any]) -> bytes:
    """A message's blocks without their breakpoints, one after the other (a string content as its text block)."""
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    return b"".join(_key({k: v for k, v in b.items() if k != "cache_control"}) for b in blocks if isinstance(b, dict))


def _breakpoints(body: dict[str, Any]) -> int:
    count = int("cache_control" in body)
    for group in (body.get("tools"), body.get("system")):
        if isinstance(group, list):
            count += sum(1 for b in group if isinstance(b, dict) and "cache_control" in b)
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            count += sum(1 for b in content if marker(b) is not None)
    return int(count)


def _key(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
