"""Anthropic's Messages API: `system` and `messages` as the chat messages the strategies see, and back.

The view (parse):
- `system` (a string or text blocks) is a system message, so pinned; so is a `role: "system"` message inside
  `messages` (the mid-conversation-system beta).
- An assistant message is one assistant message: its tool_use blocks are its tool_calls (by id, the input as JSON
  arguments), every other block (text, thinking, redacted_thinking, server tool blocks, types unknown here) one of
  its content parts. Strategies read and rewrite only text parts, so a thinking block is never altered.
- A user message's tool_result blocks are tool messages (tool_call_id = tool_use_id), which chat places right after
  the assistant message that called them; the user message's other blocks follow as one user message.

Every view message carries, in its WIRE_KEY (strategies.messages), ORIGIN: [message index, block index] for a tool
result, [message index, -1] for the rest of a message, [-1, -1] for `system`. conversation.py never reads it, and a
strategy that rewrites a message copies its keys along, so render knows every message's original, changed or not.
An assistant view's WIRE_KEY also holds, as CARRIED, the text of its thinking blocks: the model reads it (Claude
Code keeps every turn's thinking), so the token counter counts it, and no strategy reads it as something it could
shorten. A block's cache_control is not in the view (its part is a copy without it): a breakpoint says where the
client caches, not what the model reads, and moves from message to message, so a message reads the same on every
request wherever the client's breakpoints are.

Render: a message whose views all came back unchanged is the original object, so it is written back as it came; a
changed one is rebuilt from its original, block by block, in the original order (tool results merged back into
their user message); cache_control.py has the breakpoint rule. Settle, before the result is counted: the latest
assistant turn, and the one holding the latest `compaction` block (server compaction), are kept whole.

The expand tool (expand, stream, rounds): a round's assistant turn goes as the model wrote it (the blocks in its
WIRE_KEY), the proxy's results as a user turn of tool_result blocks; a round shown again on a later request takes
back, from the start of the client's next assistant message, the blocks the client was shown of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from app.edge.errors import ApiError
from app.settings import Api
from app.wire.anthropic.expand import TOOL, MessagesExpandTool
from app.wire.anthropic.rounds import BLOCKS, CARRIED, THINKING, is_expand, shown_again
from app.wire.base import ExpandTool, Parsed
from app.wire.cache_control import CACHE_CONTROL, Placed, breakpoints, settle_breakpoints
from app.wire.json_body import dump_body, dump_json, parse_object
from strategies import Message
from strategies.conversation import tool_calls_of
from strategies.messages import WIRE_KEY

ORIGIN = "origin"  # in a view message's WIRE_KEY
SYSTEM = -1
REST = -1  # the block index of a view that holds the rest of a message, not one tool result
COMPACTION = "compaction"  # the block Anthropic's server compaction (compact_20260112) answers with
# The anthropic-beta value that opts into a model's 1M-token window (the model table's extended_context_window).
CONTEXT_1M = "context-1m-"
ROLES = frozenset({"user", "assistant", "system"})
# Anthropic's error types by status (its "Errors" page); what it has no status for falls to the class of its status.
_ERROR_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def anthropic_error_body(
    status: int, message: str, *, type: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """`{"type": "error", "error": {"type", "message"}}`: Anthropic's SDKs read nothing else; the error's type comes
    from its status, and OpenAI's param and code have no place in it.
    """
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def _origin(message: Message) -> list[int] | None:
    """Where in the body a view message came from; None for a message a strategy made."""
    wire = message.get(WIRE_KEY)
    origin = wire.get(ORIGIN) if isinstance(wire, dict) else None
    return origin if isinstance(origin, list) else None


def _invalid(message: str) -> ApiError:
    return ApiError(400, message, code="invalid_request")


@dataclass(frozen=True)
class AnthropicParsed(Parsed):
    """What render needs besides the view: the views made of each original message, in order."""

    views: tuple[tuple[Message, ...], ...] = ()


class AnthropicMessages:
    """POST /v1/messages. betas: the request's anthropic-beta values (the 1M-context beta widens the window)."""

    name = "messages"
    path = "/v1/messages"
    dry_run_path = "/compact/messages"
    api: Api = "anthropic"
    upstream_path = "messages"
    error_body = staticmethod(anthropic_error_body)

    def __init__(self, betas: Iterable[str] = ()) -> None:
        self.extended_context = any(beta.strip().startswith(CONTEXT_1M) for beta in betas)
        self.expand: ExpandTool | None = MessagesExpandTool()

    def for_request(self, headers: Mapping[str, str]) -> AnthropicMessages:
        return AnthropicMessages(headers.get("anthropic-beta", "").split(","))

    def parse(self, raw: bytes, max_depth: int) -> Parsed:
        body, stdlib = parse_object(raw, max_depth)
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise _invalid("messages: Field required (an array of message objects).")
        stream = body.get("stream")
        if stream is not None and not isinstance(stream, bool):
            raise _invalid("stream: Input should be a valid boolean.")
        system = body.get("system")
        if system is not None and not isinstance(system, str | list):
            raise _invalid("system: Input should be a string or an array of text blocks.")
        if isinstance(system, list):
            _check_blocks(system, "system")
        view: list[Message] = []
        if system is not None:
            view.append({"role": "system", "content": system, WIRE_KEY: {ORIGIN: [SYSTEM, REST]}})
        views = []
        for index, message in enumerate(messages):
            views.append(_view(index, message))
            view.extend(views[-1])
        model = body.get("model")
        model = model if isinstance(model, str) else ""
        request = {k: v for k, v in body.items() if k not in ("messages", "system")}
        if isinstance(request.get("tools"), list):
            # The token counter prices tool definitions in OpenAI's shape: the same schema, another wrapper.
            request["tools"] = [_as_function(tool) for tool in request["tools"]]
        return AnthropicParsed(body, view, model, request, stdlib, self.extended_context, views=tuple(views))

    def settle(self, parsed: Parsed, messages: list[Message]) -> list[Message]:
        assert isinstance(parsed, AnthropicParsed), "settle takes what this format's parse gave"
        made = {id(view) for views in parsed.views for view in views}
        # An assistant turn a strategy left with only its thinking (its tool uses dropped) says nothing: it goes.
        kept = [m for m in messages if id(m) in made or not _only_thinking(m)]
        return _keep_whole_turns(parsed, messages if len(kept) == len(messages) else kept)

    def render(self, parsed: Parsed, messages: list[Message]) -> bytes:
        assert isinstance(parsed, AnthropicParsed), "render takes what this format's parse gave"
        messages = _keep_whole_turns(parsed, messages)  # settled already by the Compactor; cheap if so
        system = parsed.body.get("system")
        placed: list[Placed] = []
        if isinstance(system, list):
            placed.append(Placed(None, [(SYSTEM, k) for k in range(len(system))], system, untouched=True))
        added: list[dict[str, Any]] = []  # what a strategy said in the system's voice (notes)
        groups: dict[int, list[Message]] = {}
        order: list[int | Message] = []  # an original message's index at its first view, or a new message
        for message in messages:
            origin = _origin(message)
            if origin is None:
                if message.get("role") in ("system", "developer"):
                    added.append({"type": "text", "text": _text(message)})
                else:
                    order.append(message)
            elif origin[0] != SYSTEM:  # the system view is pinned, so unchanged
                if origin[0] not in groups:
                    groups[origin[0]] = []
                    order.append(origin[0])
                groups[origin[0]].append(message)
        claimed: dict[int, int] = {}  # an original message's leading blocks an expand round shown again took
        for n, item in enumerate(order):
            if isinstance(item, dict):
                following = next((i for i in order[n + 1 :] if isinstance(i, int)), None)
                rebuilt: Placed | None = _new_message(parsed, item, following, claimed)
            else:
                rebuilt = _rebuild(parsed, item, groups[item], claimed.get(item, 0))
            if rebuilt is not None:
                placed.append(rebuilt)
        settle_breakpoints(placed, breakpoints(system, parsed.body["messages"]), _fixed_breakpoints(parsed.body))
        system_out = placed.pop(0).blocks if isinstance(system, list) else system
        if added:
            head = system_out if isinstance(system_out, list) else [{"type": "text", "text": system}] if system else []
            system_out = [*head, *added]
        body = {**parsed.body, "messages": _merge_turns(placed)}
        if system_out is not system:
            body["system"] = system_out
        if "tools" not in body and any(is_expand(b) for item in placed for b in item.blocks):
            # Expand rounds in a request without the tool (the last round, past expand_max_rounds): the API takes
            # tool_use blocks only in a request that defines tools, so it has the tool, and no tool may be called.
            body["tools"] = [TOOL]
            body.setdefault("tool_choice", {"type": "none"})
        return dump_body(body, parsed.stdlib)

    def dry_run_fields(self, sent: dict[str, Any]) -> dict[str, Any]:
        return {"system": sent.get("system"), "messages": sent.get("messages", [])}

    def stream_error_event(self, message: str, code: str) -> bytes:
        # The anthropic SDKs raise on an `error` event; no message_stop follows, so none takes the answer for whole.
        kind = "timeout_error" if code == "upstream_timeout" else "api_error"
        error = {"type": "error", "error": {"type": kind, "message": message}}
        return b"event: error\ndata: " + dump_json(error) + b"\n\n"


# --- parse ------------------------------------------------------------------------------------------------------


def _check_blocks(blocks: list[Any], where: str) -> None:
    for k, block in enumerate(blocks):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise _invalid(f"{where}.{k}: Input should be an object with a string 'type'.")


def _view(index: int, message: Any) -> tuple[Message, ...]:
    # A role that is no string (a list, say) cannot even be looked up in ROLES: a 400 too, never a TypeError.
    if not isinstance(message, dict) or not isinstance(message.get("role"), str) or message["role"] not in ROLES:
        raise _invalid(f"messages.{index}: Input should be an object with role 'user', 'assistant' or 'system'.")
    role, content = message["role"], message.get("content")
    if isinstance(content, str):
        return ({"role": role, "content": content, WIRE_KEY: {ORIGIN: [index, REST]}},)
    if not isinstance(content, list):
        raise _invalid(f"messages.{index}.content: Input should be a string or an array of content blocks.")
    _check_blocks(content, f"messages.{index}.content")
    if role == "assistant":
        return (_assistant_view(index, content),)
    views: list[Message] = []
    rest: list[Any] = []
    for k, block in enumerate(content):
        call_id = block.get("tool_use_id")
        if role == "user" and block["type"] == "tool_result" and isinstance(call_id, str):
            result = _unmarked_parts(block.get("content", ""))
            views.append({"role": "tool", "tool_call_id": call_id, "content": result, WIRE_KEY: {ORIGIN: [index, k]}})
        else:
            rest.append(_unmarked(block))
    if rest or not views:
        # One plain text block reads as the string it is: a client may send either (Claude Code sends its prompt as
        # a block while it carries the breakpoint, as a string later).
        said: Any = rest[0]["text"] if not views and len(rest) == 1 and _plain_text(rest[0]) else rest
        views.append({"role": role, "content": said, WIRE_KEY: {ORIGIN: [index, REST]}})
    return tuple(views)


def _plain_text(block: dict[str, Any]) -> bool:
    return block.keys() == {"type", "text"} and block["type"] == "text" and isinstance(block["text"], str)


def _assistant_view(index: int, content: list[Any]) -> Message:
    parts: list[Any] = []
    calls: list[dict[str, Any]] = []
    thinking: list[str] = []
    for block in content:
        if block["type"] == "tool_use" and isinstance(block.get("id"), str):
            arguments = dump_json(block.get("input", {})).decode("utf-8", "surrogatepass")
            function = {"name": block.get("name") if isinstance(block.get("name"), str) else "", "arguments": arguments}
            calls.append({"id": block["id"], "type": "function", "function": function})
            continue
        parts.append(_unmarked(block))
        if block["type"] == "thinking" and isinstance(block.get("thinking"), str):
            thinking.append(block["thinking"])
    wire: dict[str, Any] = {ORIGIN: [index, REST]}
    if thinking:
        wire[CARRIED] = "\n".join(thinking)
    view: Message = {"role": "assistant", "content": parts, WIRE_KEY: wire}
    if calls:
        view["tool_calls"] = calls
    return view


def _unmarked(block: dict[str, Any]) -> dict[str, Any]:
    """The block as the view shows it: without its cache breakpoint, which says where the client caches, not what the
    model reads, and moves from message to message (Claude Code's is on the last one). So a message reads the same on
    every request, whatever the breakpoints did (the expand rounds' anchors, the prefix report); render writes the
    original block, breakpoint and all, wherever the view's part stands for it.
    """
    return {k: v for k, v in block.items() if k != CACHE_CONTROL} if CACHE_CONTROL in block else block


def _unmarked_parts(content: Any) -> Any:
    if isinstance(content, list) and any(isinstance(p, dict) and CACHE_CONTROL in p for p in content):
        return [_unmarked(p) if isinstance(p, dict) else p for p in content]
    return content


def _rest_positions(content: list[Any], role: Any) -> list[int]:
    """Where the blocks of a message's rest view stand in it, as _view splits them: all but a user message's tool
    results, or an assistant's tool uses.
    """
    split, key = ("tool_use", "id") if role == "assistant" else ("tool_result", "tool_use_id")
    return [k for k, block in enumerate(content) if not (_type(block) == split and isinstance(block.get(key), str))]


def _as_function(tool: Any) -> Any:
    if not isinstance(tool, dict) or "input_schema" not in tool:
        return tool  # a server tool (web search, code execution, ...): its definition is the provider's
    schema = tool["input_schema"]
    return {
        "type": "function",
        "function": {"name": tool.get("name", ""), "description": tool.get("description", ""), "parameters": schema},
    }


# --- render -----------------------------------------------------------------------------------------------------


def _text(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _fixed_breakpoints(body: dict[str, Any]) -> int:
    """Breakpoints no compaction moves: the tool definitions' and the request's own automatic one."""
    tools = body.get("tools")
    count = sum(1 for t in tools if isinstance(t, dict) and "cache_control" in t) if isinstance(tools, list) else 0
    return count + ("cache_control" in body)


def _new_message(parsed: AnthropicParsed, message: Message, following: int | None, claimed: dict[int, int]) -> Placed:
    """A message no original stands for: an expand round's (app.expansion: its assistant turn, a tool result), or one
    a strategy made (notes: a user or assistant message of text). following: the original message after it.
    """
    role = message.get("role")
    if role == "tool":  # an expand call's result, in the user turn the API wants it in
        content = message.get("content")
        result = {"type": "tool_result", "tool_use_id": message.get("tool_call_id"), "content": content or ""}
        return Placed({"role": "user", "content": [result]}, [None], [result])
    wire = message.get(WIRE_KEY)
    if role == "assistant" and isinstance(wire, dict) and isinstance(wire.get(BLOCKS), list):
        blocks = wire[BLOCKS]  # this request's round, as the model wrote it (wire.anthropic.rounds)
        return Placed({"role": "assistant", "content": blocks}, [None] * len(blocks), blocks)
    if role == "assistant" and tool_calls_of(message):  # a round shown again: what the client was shown goes back in
        after = parsed.body["messages"][following] if following is not None else None
        content = after.get("content") if isinstance(after, dict) and after.get("role") == "assistant" else None
        offset = claimed.get(following, 0) if following is not None else 0
        blocks, taken, took = shown_again(message, content if isinstance(content, list) else [], offset)
        if took and following is not None:
            claimed[following] = offset + took
        positions = [None if k is None or following is None else (following, k) for k in taken]
        return Placed({"role": "assistant", "content": blocks}, positions, blocks)
    return Placed({"role": "assistant" if role == "assistant" else "user", "content": _text(message)}, [], [])


def _rebuild(parsed: AnthropicParsed, index: int, views: list[Message], taken: int = 0) -> Placed | None:
    """The original message as its views came back; taken: its leading blocks an expand round shown again took."""
    original = parsed.body["messages"][index]
    content = original.get("content")
    made = parsed.views[index]
    if len(views) == len(made) and all(a is b for a, b in zip(views, made, strict=True)):
        blocks = content if isinstance(content, list) else []
        if taken:
            if not blocks[taken:]:
                return None
            return Placed(
                {**original, "content": blocks[taken:]}, [(index, k) for k in range(taken, len(blocks))], blocks[taken:]
            )
        return Placed(original, [(index, k) for k in range(len(blocks))], blocks, untouched=True)
    if isinstance(content, str):
        new = views[0].get("content")
        return Placed({**original, "content": new if isinstance(new, str) else _text(views[0])}, [], [])
    keyed: list[tuple[float, int, Any]] = []
    made_by_k = {view[WIRE_KEY][ORIGIN][1]: view for view in made}
    for view in views:
        k = view[WIRE_KEY][ORIGIN][1]
        if k != REST:
            keyed.append((k, 0, _tool_result(content[k], view, made_by_k.get(k))))
        else:
            keyed.extend(_rest_blocks(content, view, made_by_k.get(REST)))
    keyed = sorted((item for item in keyed if item[0] >= taken), key=lambda item: (item[0], item[1]))
    if not keyed or (original.get("role") == "assistant" and all(_type(b) in THINKING for _, _, b in keyed)):
        return None  # nothing left, or only thinking, its tool uses gone (as settle leaves it): nothing said
    positions = [(index, int(k)) if k == int(k) else None for k, _, _ in keyed]
    blocks = [block for _, _, block in keyed]
    return Placed({**original, "content": blocks}, positions, blocks)


def _only_thinking(message: Message) -> bool:
    content = message.get("content")
    return (
        message.get("role") == "assistant"
        and not tool_calls_of(message)
        and isinstance(content, list)
        and all(_type(part) in THINKING for part in content)
    )


def _type(block: Any) -> Any:
    return block.get("type") if isinstance(block, dict) else None


def _tool_result(original: dict[str, Any], view: Message, made: Message | None) -> dict[str, Any]:
    if made is not None and view.get("content") is made.get("content"):
        return original
    return {**original, "content": view.get("content")}


def _rest_blocks(content: list[Any], view: Message, made: Message | None) -> list[tuple[float, int, Any]]:
    """The blocks of a message's rest view, each keyed by its original position: an original part where it was, a
    rewritten text where the first text block was, a tool call as its tool_use block (new input if it changed).
    """
    at = {id(block): k for k, block in enumerate(content)}
    if made is not None and isinstance(made.get("content"), list):
        # The parts as parse made them (a block's copy without its breakpoint, _unmarked) stand for their blocks.
        at.update(
            (id(part), k) for part, k in zip(made["content"], _rest_positions(content, made.get("role")), strict=False)
        )
    texts = [k for k, block in enumerate(content) if _type(block) == "text"]
    thinking = [k for k, block in enumerate(content) if _type(block) in THINKING]
    # A text with no original goes where the first text was, else after the thinking (which leads a turn).
    anchor = float(texts[0]) if texts else (thinking[-1] + 0.5 if thinking else -0.5)
    parts = view.get("content")
    if isinstance(parts, str):
        parts = [{"type": "text", "text": parts}] if parts else []
    keyed: list[tuple[float, int, Any]] = []
    for n, part in enumerate(parts if isinstance(parts, list) else []):
        k = at.get(id(part))
        if k is None and _type(part) != "text":
            k = next((j for j, block in enumerate(content) if block == part), None)
        keyed.append((anchor if k is None else k, n, part if k is None else content[k]))
    uses: dict[str, list[int]] = {}
    for k, block in enumerate(content):
        if _type(block) == "tool_use" and isinstance(block.get("id"), str):
            uses.setdefault(block["id"], []).append(k)
    made_calls = {id(call) for call in tool_calls_of(made)} if made is not None else set()
    for call in tool_calls_of(view):
        ks = uses.get(call.get("id"))  # type: ignore[arg-type]
        if not ks:
            continue
        k = ks.pop(0)
        keyed.append((k, 0, content[k] if id(call) in made_calls else _tool_use(content[k], call)))
    return keyed


def _tool_use(original: dict[str, Any], call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function")
    arguments = function.get("arguments") if isinstance(function, dict) else None
    try:
        new = orjson.loads(arguments) if isinstance(arguments, str) else None
    except orjson.JSONDecodeError:
        new = None
    # Strategies keep shortened arguments valid JSON; anything else keeps the input the model wrote.
    return {**original, "input": new} if isinstance(new, dict) else original


def _keep_whole_turns(parsed: AnthropicParsed, messages: list[Message]) -> list[Message]:
    """The assistant turns that must go as they came, with every tool use of them answered, back in place if a
    strategy changed or dropped them:
    - the latest one: with thinking on, the API wants the turn a tool loop continues from exactly as the model wrote
      it (signed thinking first), so no strategy may touch it;
    - the one holding the latest `compaction` block (Anthropic's compact_20260112): the server reads the
      conversation before it from that block alone, so dropping it would lose all of that.
    """
    originals = parsed.body["messages"]
    assistant = [i for i, m in enumerate(originals) if m.get("role") == "assistant"]
    compacted = [i for i in assistant if any(b.get("type") == COMPACTION for b in _content_blocks(originals[i]))]
    for index in sorted({*assistant[-1:], *compacted[-1:]}):
        messages = _keep_turn(parsed, messages, index)
    return messages


def _content_blocks(message: Any) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _keep_turn(parsed: AnthropicParsed, messages: list[Message], index: int) -> list[Message]:
    turn = next(view for view in parsed.views[index] if view[WIRE_KEY][ORIGIN][1] == REST)
    if any(message is turn for message in messages):
        return messages
    ids = {call.get("id") for call in tool_calls_of(turn)}
    following = parsed.views[index + 1] if index + 1 < len(parsed.views) else ()
    results = [view for view in following if view.get("tool_call_id") in ids]
    present = {tuple(origin) for m in messages if (origin := _origin(m)) is not None}
    missing = [view for view in results if tuple(view[WIRE_KEY][ORIGIN]) not in present]
    kept = [m for m in messages if _origin(m) != [index, REST]]
    at = next(
        (n for n, m in enumerate(kept) if (origin := _origin(m)) is not None and origin[0] > index),
        len(kept),
    )
    return [*kept[:at], turn, *missing, *kept[at:]]


def _merge_turns(placed: list[Placed]) -> list[Any]:
    """The messages, a run of same-role user or assistant messages merged into one (where a strategy removed what
    stood between them), as the API itself would read them.
    """
    out: list[Any] = []
    for item in placed:
        message = item.message
        assert message is not None, "the system's blocks are no message"
        role = message.get("role")
        if out and role in ("user", "assistant") and out[-1].get("role") == role:
            out[-1] = {**out[-1], "content": [*_blocks(out[-1]), *_blocks(message)]}
        else:
            out.append(message)
    return out


def _blocks(message: Any) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, list) else []
