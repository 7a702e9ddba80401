"""The benchmark's requests in each wire format the proxy compacts, so one replay measures every format it serves.
A format is one entry of FORMS: how a request is written in that format (its body) and what of it the replay
measures (Replayed). Every form's body goes through the proxy's own path (compact): parsed by the format's
app.wire class, then Compactor.compact_sync (the chain, settle, render), as the proxy compacts a request.

- `chat`: the corpus's chat messages as they are, through app.wire.ChatCompletions.
- `responses`: each request as a Responses API body (input items, flat tools) through app.wire.Responses, the
  rendered input checked for its pairs; the chain's messages measured as chat messages, so that everything measured
  after the chain (invariants, the prompt cache, what the model can see) is the same code as for chat.
- `messages`: each request in Claude Code's Messages shape through app.wire.AnthropicMessages: `system` as text
  blocks, every assistant turn that calls tools opened by a signed thinking block, the tool results of a turn in one
  user message, and cache_control on the last system block and on the last block of the last message.
  messages_problems checks what compaction must keep of such a body; it is priced by Anthropic's breakpoint rules
  over the body sent (prompt_cache.BreakpointCache).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import orjson

from app.compaction.compactor import Compacted, Compactor
from app.expansion import Expansion
from app.settings import DEFAULT_MAX_JSON_DEPTH
from app.wire import AnthropicMessages, ChatCompletions, Parsed, Responses, WireFormat
from app.wire.cache_control import MAX_BREAKPOINTS, marker
from strategies import Chain, ChainResult, Message
from strategies.conversation import text_of
from strategies.digests import message_bytes
from strategies.invariants import pairing_problems
from strategies.messages import WIRE_KEY
from strategies.refs import Originals

MUTATED = "the input messages were mutated"


@dataclass(frozen=True)
class Replayed:
    """One request compacted in a form, as the replay measures it."""

    seen: list[Message]  # the conversation the chain ran over: what the invariants compare its result with
    result: ChainResult  # settled as the proxy settles it
    sent: bytes  # what goes upstream; compacting twice must give the same
    problems: list[str] = field(default_factory=list)  # what the form's own checks found in what goes
    ms: float = 0.0  # the proxy's work: parsing the body, then Compactor.compact_sync
    # Where the proxy offers the expand tool with this request (a stub's ref resolves): what its rounds are made of
    # (Compacted.expansion); None: not offered.
    expansion: Expansion | None = None
    fallback: str | None = None  # a step's fallback chain ran instead (its reason, e.g. not_expandable)

    @property
    def originals(self) -> Originals | None:
        """What the expand tool's calls resolve from; None: the tool is not offered."""
        return self.expansion.originals if self.expansion is not None else None


class WireForm(Protocol):
    wire: WireFormat  # the format the proxy parses and renders the body with
    # Priced by Anthropic's breakpoint rules over the body sent (prompt_cache.BreakpointCache); otherwise by the
    # cache model of the chat messages (prompt_cache.ConversationCache).
    breakpoints: bool

    def body(self, messages: list[Message], request: dict[str, Any]) -> bytes:
        """One request (chat messages and the rest of a chat body) as a client sends it in this form."""
        ...

    def measured(self, messages: list[Message], raw: bytes, parsed: Parsed, compacted: Compacted) -> Replayed:
        """What the replay measures of the request `raw` (made of `messages`) as the proxy compacted it (compact
        fills in the time, the expansion and the fallback).
        """
        ...


def compact(
    form: WireForm,
    compactor: Compactor,
    chain: Chain,
    messages: list[Message],
    request: dict[str, Any],
    *,
    check_input: bool = False,
) -> Replayed:
    """One request sent in `form`, compacted by the proxy's own path: the body parsed by its format, then
    Compactor.compact_sync (the chain, settle, render), as the proxy's route does with a body it compacts inline.
    check_input: also check that the chain left its input as it was (MUTATED among the problems; its time counts).
    """
    raw = form.body(messages, request)
    started = time.perf_counter()
    parsed = form.wire.parse(raw, compactor.settings.max_json_depth)
    before = [message_bytes(m) for m in parsed.messages] if check_input else None
    compacted = compactor.compact_sync(raw, form.wire, chain, parsed=parsed)
    ms = (time.perf_counter() - started) * 1000
    replayed = form.measured(messages, raw, parsed, compacted)
    mutated = before is not None and [message_bytes(m) for m in parsed.messages] != before
    problems = [*replayed.problems, *([MUTATED] if mutated else [])]
    return replace(replayed, ms=ms, problems=problems, expansion=compacted.expansion, fallback=compacted.fallback)


def round_body(replayed: Replayed, rounds: list[Message], tool: bool) -> bytes:
    """What the proxy sends upstream after expand rounds (app.expansion.loop): the messages it forwarded, then the
    rounds answered so far (app.expansion.rounds.round_messages), rendered by the request's format with the expand
    tool while rounds are left (tool), without it after the last one expand_max_rounds allows.
    """
    expansion = replayed.expansion
    assert expansion is not None, "rounds follow a request the expand tool was offered on"
    return expansion.wire.render(expansion.offered if tool else expansion.plain, [*expansion.forwarded, *rounds])


class ChatForm:
    breakpoints = False

    def __init__(self) -> None:
        self.wire: WireFormat = ChatCompletions()

    def body(self, messages: list[Message], request: dict[str, Any]) -> bytes:
        return orjson.dumps({**request, "messages": messages})

    def measured(self, messages: list[Message], raw: bytes, parsed: Parsed, compacted: Compacted) -> Replayed:
        return Replayed(parsed.messages, compacted.result, compacted.body)


class ResponsesForm:
    breakpoints = False

    def __init__(self) -> None:
        self.wire: WireFormat = Responses()

    def body(self, messages: list[Message], request: dict[str, Any]) -> bytes:
        return orjson.dumps(responses_body(messages, request))

    def measured(self, messages: list[Message], raw: bytes, parsed: Parsed, compacted: Compacted) -> Replayed:
        result = compacted.result
        # What the proxy would send, read back: it must pair every call with its output as the messages did.
        read_back = self.wire.parse(compacted.body, DEFAULT_MAX_JSON_DEPTH).messages
        if pairing_problems(read_back) != pairing_problems(result.messages):
            raise AssertionError(f"the rendered input pairs differently: {pairing_problems(read_back)}")
        # Measured as the chain left them: the items a message item and the calls after it become are one message
        # read back, where the chain may have left two.
        chat = replace(result, messages=chat_messages(result.messages))
        return Replayed(messages, chat, compacted.body)


class MessagesForm:
    breakpoints = True

    def __init__(self) -> None:
        self.wire: WireFormat = AnthropicMessages()

    def body(self, messages: list[Message], request: dict[str, Any]) -> bytes:
        return messages_body(messages, request)

    def measured(self, messages: list[Message], raw: bytes, parsed: Parsed, compacted: Compacted) -> Replayed:
        problems = messages_problems(orjson.loads(raw), orjson.loads(compacted.body))
        return Replayed(parsed.messages, compacted.result, compacted.body, problems)


def chat_messages(messages: list[Message]) -> list[Message]:
    """The wire's messages as chat messages: without what only the wire reads."""
    return [{k: v for k, v in m.items() if k != WIRE_KEY} for m in messages]


def responses_body(messages: list[Message], request: dict[str, Any]) -> dict[str, Any]:
    """A chat request as a Responses body: a message item per message with content, a function_call per tool call,
    a function_call_output per tool result, the tools flat.
    """
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            output = {"type": "function_call_output", "call_id": message["tool_call_id"]}
            if "name" in message:
                output["name"] = message["name"]
            items.append({**output, "output": _parts(message.get("content"), "input_text")})
            continue
        if message.get("content") is not None:
            text_type = "output_text" if role == "assistant" else "input_text"
            items.append({"type": "message", "role": role, "content": _parts(message["content"], text_type)})
        for call in message.get("tool_calls") or []:
            function = call["function"]
            items.append(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": function["name"],
                    "arguments": function["arguments"],
                }
            )
    body: dict[str, Any] = {k: v for k, v in request.items() if k != "tools"}
    body["input"] = items
    if request.get("tools"):
        body["tools"] = [{"type": "function", **tool["function"]} for tool in request["tools"]]
    return body


def _parts(content: Any, text_type: str) -> Any:
    if not isinstance(content, list):
        return content
    return [{**part, "type": text_type} if part.get("type") == "text" else part for part in content]


EPHEMERAL = {"type": "ephemeral"}


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
    # Claude Code's max_tokens unless the request names one (a small window cannot hold 8,192 of answer).
    body: dict[str, Any] = {"model": request.get("model", "claude-sonnet-4-5"), "max_tokens": 8192}
    if isinstance(request.get("max_tokens"), int):
        body["max_tokens"] = request["max_tokens"]
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
    if _ttls_in_order(before) and not _ttls_in_order(after):
        problems.append("a 1-hour breakpoint after a 5-minute one")
    return problems


def _ttls_in_order(body: dict[str, Any]) -> bool:
    """The API's rule: in request order (tools, system, messages), every 1-hour breakpoint before any 5-minute one."""
    controls = [
        b.get("cache_control")
        for group in (body.get("tools"), body.get("system"))
        if isinstance(group, list)
        for b in group
        if isinstance(b, dict)
    ]
    for message in body.get("messages", []):
        content = message.get("content")
        controls += [marker(b) for b in content] if isinstance(content, list) else []
    hours = [isinstance(c, dict) and c.get("ttl") == "1h" for c in controls if c is not None]
    return hours == sorted(hours, reverse=True)


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
    compactions = [b for m in originals for b in _content(m) if b.get("type") == "compaction"]
    if compactions and _key(compactions[-1]) not in {_key(b) for m in sent for b in _content(m)}:
        problems.append("the latest compaction block is gone")
    if originals and sent and not runs[0].startswith(bare_run(originals[0])):
        problems.append("the first message changed")
    return problems


def _content(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


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


FORMS: dict[str, WireForm] = {"chat": ChatForm(), "responses": ResponsesForm(), "messages": MessagesForm()}
