"""OpenAI's Responses API (POST /v1/responses): `instructions` and the `input` items as the conversation the
strategies see, and back.

What each item becomes (strategies.conversation reads these messages):
- `instructions` (a string): a system message, pinned.
- message items: a message of their role; text parts (input_text, output_text) are chat "text" parts. System and
  developer messages are pinned, as in chat.
- calls: a tool call of an assistant message, by call_id; calls that follow each other, with the assistant message
  item right before them, make one assistant message, as one chat completion would. A function call's `arguments`
  and a custom tool call's `input` are what strategies may shorten; other calls answered by an output item (local
  shell, shell, apply_patch, computer, MCP approval requests) show them nothing.
- outputs: a tool message answering its call. Function, custom tool, local shell and apply_patch outputs show
  their text; the others show nothing.
- items the API made with a turn, never to be changed (reasoning with its encrypted_content, the built-in tools it
  ran itself, compaction items the latest has superseded): they ride with the message of the next item, or of the
  last one at the end, so a strategy that drops that message drops them with it, and keeps them when it keeps it.
  A reasoning item stays right before the call or message it came with.
- pinned as they came: the latest compaction item (it carries the conversation before it), Codex's
  additional_tools and tool searches (both give the model tools it may still call), configuration updates, item
  references, the compaction trigger, programmatic tool calls, an output whose call is not in `input` (it answers
  a call of the previous_response_id's response), items of types or shapes this module does not know.

What a message holds that the strategies do not see costs a token per 4 bytes of its JSON (messages.WIRE_KEY).
Rendering: a message no strategy changed goes out as its original items; a changed one is rebuilt from them, only
its changed text or arguments replaced; one a strategy made (notes) becomes a message item.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

from app.edge.errors import ApiError
from app.settings import Api
from app.wire.base import ExpandTool, Parsed
from app.wire.json_body import dump_body, dump_json, parse_object
from app.wire.openai import check_stream, json_type, openai_error_body
from app.wire.responses.expand import CALL, SHOWN, ResponsesExpandTool, function_call
from app.wire.responses.items import CALLS, OUTPUTS, RIDERS, ROLES, TEXT_PARTS
from app.wire.responses.items import kind as _kind
from strategies import Message
from strategies.conversation import text_of, tool_calls_of
from strategies.messages import WIRE_KEY

BYTES_PER_TOKEN = 4


@dataclass(frozen=True)
class ResponsesParsed(Parsed):
    _: KW_ONLY  # after Parsed's fields with defaults
    items: list[Any]  # `input` as a list (a string input is one user message)
    originals: dict[int, Message]  # id(message) -> message, as parsed
    by_item: dict[int, Message]  # a message's first item -> the message as parsed
    anchors: frozenset[int]  # items the strategies see (messages, calls, outputs); the rest go out as they came


def _call_key(item: dict[str, Any]) -> str | None:
    key = item.get("id") if _kind(item) == "mcp_approval_request" else item.get("call_id")
    return key if isinstance(key, str) else None


def _output_key(item: dict[str, Any]) -> str | None:
    kind = _kind(item)
    if kind == "mcp_approval_response":
        key = item.get("approval_request_id")
    elif kind == "local_shell_call_output" and not isinstance(item.get("call_id"), str):
        key = item.get("id")  # the SDK's types name the call this way
    else:
        key = item.get("call_id")
    return key if isinstance(key, str) else None


def _programmatic(item: dict[str, Any]) -> bool:
    """A call or output of programmatic tool calling: it belongs to a program the view knows nothing of."""
    caller = item.get("caller")
    return isinstance(caller, dict) and caller.get("type") != "direct"


def _is_message(item: dict[str, Any]) -> bool:
    role = item.get("role")
    return (
        _kind(item) in (None, "message")
        and isinstance(role, str)
        and role in ROLES
        and isinstance(item.get("content"), str | list)
        and not _programmatic(item)
    )


def _unseen(item: Any) -> int:
    return len(dump_json(item)) // BYTES_PER_TOKEN


def _chat_content(content: Any) -> Any:
    """Content as chat has it: a string as it is; in a part list, input_text and output_text parts are text parts."""
    if not isinstance(content, list):
        return content
    return [
        {**part, "type": "text"}
        if isinstance(part, dict) and _kind(part) in TEXT_PARTS and isinstance(part.get("text"), str)
        else part
        for part in content
    ]


def _item_content(content: Any, template: Any, default_text_type: str) -> Any:
    """Chat content back in the item's shape: text parts of the template's text part type."""
    text_type = (
        next(
            (p["type"] for p in template if isinstance(p, dict) and _kind(p) in TEXT_PARTS),
            default_text_type,
        )
        if isinstance(template, list)
        else default_text_type
    )
    if isinstance(content, str):
        return [{"type": text_type, "text": content}] if isinstance(template, list) else content
    if isinstance(content, list):
        return [{**p, "type": text_type} if isinstance(p, dict) and p.get("type") == "text" else p for p in content]
    return text_of(content)


def _text_type(role: Any) -> str:
    return "output_text" if role == "assistant" else "input_text"


class _View:
    """Builds the messages from the items in one pass; the messages are its own until it is done."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items
        self.messages: list[Message] = []
        self.anchors: set[int] = set()
        self.riders: list[int] = []  # waiting for the next item's message
        self.open: Message | None = None  # the assistant message the next calls join
        self.calls: set[str] = set()  # keys of the calls so far: an output answers one of them, or is pinned
        compactions = [i for i, item in enumerate(items) if _kind(item) == "compaction"]
        self.latest_compaction = compactions[-1] if compactions else -1

    def build(self) -> list[Message]:
        for index, item in enumerate(self.items):
            self.item(index, item)
        riders, self.riders = self.riders, []
        if riders and self.messages:
            self.attach(self.messages[-1], riders)
        elif riders:
            self.pinned(riders)
        return self.messages

    def item(self, index: int, item: dict[str, Any]) -> None:
        kind = _kind(item)
        if kind in RIDERS and index != self.latest_compaction:
            self.riders.append(index)
            return
        if _is_message(item):
            role = item["role"]
            self.anchors.add(index)
            message = self.new({"role": role, "content": _chat_content(item["content"])}, index)
            self.open = message if role == "assistant" else None
            return
        if kind in CALLS and _call_key(item) is not None and not _programmatic(item):
            self.call(index, item, kind)
            return
        key = _output_key(item)
        if kind in OUTPUTS and key in self.calls and not _programmatic(item):
            field = OUTPUTS[kind]
            output = item.get(field) if field else None
            self.anchors.add(index)
            result: Message = {"role": "tool", "tool_call_id": key}
            if isinstance(item.get("name"), str):  # the tool's name, which chat results may carry too
                result["name"] = item["name"]
            if isinstance(output, str | list):
                self.new({**result, "content": _chat_content(output)}, index)
            else:
                self.new({**result, "content": ""}, index, unseen=_unseen(item))
            self.open = None
            return
        self.pinned([index])

    def call(self, index: int, item: dict[str, Any], kind: str) -> None:
        key = _call_key(item)
        assert key is not None
        field = CALLS[kind]
        shown = item.get(field) if field else None
        name = item.get("name")
        arguments = shown if isinstance(shown, str) else ""
        call = {
            "id": key,
            "type": "function",
            "function": {"name": name if isinstance(name, str) else kind, "arguments": arguments},
        }
        unseen = 0 if isinstance(shown, str) else _unseen(item)
        self.anchors.add(index)
        self.calls.add(key)
        if self.open is None:
            self.open = self.new({"role": "assistant", "content": None, "tool_calls": [call]}, index, unseen=unseen)
        else:
            self.open.setdefault("tool_calls", []).append(call)
            self.attach(self.open, [*self.riders, index], unseen)
            self.riders = []

    def pinned(self, indices: list[int]) -> None:
        self.new({"role": "developer"}, *indices)  # what it costs is all unseen: attach counts it
        self.open = None

    def new(self, message: Message, *indices: int, unseen: int = 0) -> Message:
        message[WIRE_KEY] = {"tokens": 0, "items": []}
        self.attach(message, [*self.riders, *indices], unseen)
        self.riders = []
        self.messages.append(message)
        return message

    def attach(self, message: Message, indices: Iterable[int], unseen: int = 0) -> None:
        wire = message[WIRE_KEY]
        for index in indices:
            if index not in self.anchors:
                unseen += _unseen(self.items[index])
            wire["items"].append(index)
        wire["tokens"] += unseen


class Responses:
    """POST /v1/responses: the conversation is `instructions` and the `input` items."""

    name = "responses"
    path = "/v1/responses"
    dry_run_path = "/compact/responses"
    api: Api = "openai"
    upstream_path = "responses"
    error_body = staticmethod(openai_error_body)

    def __init__(self) -> None:
        self.expand: ExpandTool | None = ResponsesExpandTool()

    def for_request(self, headers: Mapping[str, str]) -> Responses:
        return self

    def parse(self, raw: bytes, max_depth: int) -> Parsed:
        """The fields the proxy acts on are checked: `input` a string or a list of objects, `stream` a boolean or
        null. Everything else, and every item, is forwarded as it came unless a strategy changes it.
        """
        body, stdlib = parse_object(raw, max_depth)
        check_stream(body)
        items = _input_items(body.get("input"))
        view = _View(items)
        messages = view.build()
        instructions = body.get("instructions")
        if isinstance(instructions, str):
            pinned = {"role": "system", "content": instructions, WIRE_KEY: {"tokens": 0, "instructions": True}}
            messages.insert(0, pinned)
        model = body.get("model")
        return ResponsesParsed(
            body,
            messages,
            model if isinstance(model, str) else "",
            _request(body),
            stdlib,
            items=items,
            originals={id(m): m for m in messages},
            by_item={m[WIRE_KEY]["items"][0]: m for m in messages if m[WIRE_KEY].get("items")},
            anchors=frozenset(view.anchors),
        )

    def settle(self, parsed: Parsed, messages: list[Message]) -> list[Message]:
        return messages  # render pairs what the strategies left; nothing else must go whatever they did

    def render(self, parsed: Parsed, messages: list[Message]) -> bytes:
        if not isinstance(parsed, ResponsesParsed):
            raise TypeError("Responses.render takes what Responses.parse returned")
        items: list[Any] = []
        emitted: set[int] = set()  # a message a strategy repeated must not repeat an item (reasoning ids are unique)
        body = dict(parsed.body)
        again: _Again | None = None
        for message in messages:
            wire = message.get(WIRE_KEY)
            wire = wire if isinstance(wire, dict) else {}
            if wire.get("instructions"):
                if parsed.originals.get(id(message)) is not message:
                    body["instructions"] = text_of(message.get("content"))
                continue
            if isinstance(wire.get("output"), list):  # an expand round's turn: the response's items, as they go
                items.extend(wire["output"])
                continue
            if isinstance(wire.get("handles"), list):  # a remembered round's turn, shown again where it went
                again = again or _Again(parsed, messages)
                items.extend(again.turn(message, wire["handles"], emitted))
                continue
            indices = [i for i in wire.get("items", ()) if i not in emitted]
            emitted.update(indices)
            if parsed.originals.get(id(message)) is message:
                items.extend(parsed.items[i] for i in indices)
            elif wire.get("items") and wire["items"][0] in parsed.by_item:
                items.extend(_rebuilt(parsed, message, parsed.by_item[wire["items"][0]], indices))
            else:
                items.extend(_new_items(message))
        body["input"] = items
        return dump_body(body, parsed.stdlib)

    def dry_run_fields(self, sent: dict[str, Any]) -> dict[str, Any]:
        return {"input": sent.get("input"), "instructions": sent.get("instructions")}

    def stream_error_event(self, message: str, code: str) -> bytes:
        # The Responses API's `error` event; the openai SDKs raise APIError on a data object with an "error" key.
        error = {"message": message, "type": "upstream_error", "param": None, "code": code}
        data = {"type": "error", "code": code, "message": message, "param": None, "error": error}
        return b"event: error\ndata: " + dump_json(data) + b"\n\n"


class _Again:
    """Remembered expand rounds shown again as they went (app.wire.responses.expand.ResponsesExpandTool.turn_again).

    The client was shown every item of a round but its expand calls, so its next request holds them, after the
    messages the round followed; each round's turn takes them from there, by id, and puts its calls back between
    them, with their items' ids: the request then extends, item for item, the one the provider saw with the round.
    Only items of messages going as they came are taken. When one is missing (the client dropped it, a strategy
    changed or dropped its message), the calls go alone, without ids (an id the API would pair with a reasoning item
    that is not before it), and the client's items stay where they are.
    """

    def __init__(self, parsed: ResponsesParsed, messages: list[Message]) -> None:
        self.parsed = parsed
        self.by_id: dict[str, int] = {}
        for index, item in enumerate(parsed.items):
            if isinstance(item.get("id"), str):
                self.by_id.setdefault(item["id"], index)
        self.going = {
            index
            for message in messages
            if parsed.originals.get(id(message)) is message
            for index in message[WIRE_KEY].get("items", ())
        }

    def turn(self, message: Message, handles: list[Any], emitted: set[int]) -> list[Any]:
        calls = {call.get("id"): call for call in tool_calls_of(message)}
        shown = [self.by_id.get(h[len(SHOWN) :]) for h in handles if isinstance(h, str) and h.startswith(SHOWN)]
        if any(index is None or index in emitted or index not in self.going for index in shown):
            return [_function_call(call) for call in calls.values()]
        out: list[Any] = []
        for handle in handles:
            if not isinstance(handle, str):
                continue
            if handle.startswith(SHOWN):
                index = self.by_id[handle[len(SHOWN) :]]
                emitted.add(index)
                out.append(self.parsed.items[index])
            elif handle.startswith(CALL):
                call_id, _, item_id = handle[len(CALL) :].partition(":")
                call = calls.pop(call_id, None)
                function = call.get("function") if call is not None else None
                if isinstance(function, dict):
                    arguments = function.get("arguments")
                    out.append(function_call(call_id, arguments if isinstance(arguments, str) else "", item_id or None))
        out.extend(_function_call(call) for call in calls.values())
        return out


def _input_items(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list):
        raise ApiError(
            400,
            f"Invalid type for 'input': expected a string or an array of items, but got {json_type(value)} instead.",
            param="input",
            code="invalid_type",
        )
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise ApiError(400, f"input[{index}] must be an object.", param=f"input[{index}]", code="invalid_type")
    return value


def _request(body: dict[str, Any]) -> dict[str, Any]:
    """What a strategy reads besides the messages, in chat's names: the tools the model is given (their token
    cost) and the output reserve.
    """
    request = {k: v for k, v in body.items() if k not in ("input", "instructions")}
    tools = body.get("tools")
    if isinstance(tools, list):
        request["tools"] = [_chat_tool(tool) for tool in tools]
    if "max_output_tokens" in body:
        request["max_completion_tokens"] = body["max_output_tokens"]
    return request


def _chat_tool(tool: Any) -> Any:
    if not isinstance(tool, dict) or tool.get("type") not in ("function", "custom"):
        return tool
    return {"type": "function", "function": {k: tool[k] for k in ("name", "description", "parameters") if k in tool}}


def _rebuilt(parsed: ResponsesParsed, message: Message, original: Message, indices: list[int]) -> list[Any]:
    """A changed message's items: its original items, the changed text or arguments replaced, the calls a strategy
    removed left out (with the outputs, which are messages of their own).
    """
    calls = {call.get("id"): call for call in tool_calls_of(message)}
    changed_content = message.get("content") != original.get("content")
    out: list[Any] = []
    for index in indices:
        item = parsed.items[index]
        if index not in parsed.anchors:
            out.append(item)
            continue
        kind = _kind(item)
        if _is_message(item):
            content = message.get("content")
            if not changed_content:
                out.append(item)
            elif content:
                out.append({**item, "content": _item_content(content, item["content"], _text_type(item["role"]))})
        elif kind in CALLS:
            call = calls.pop(_call_key(item), None)
            if call is None:
                continue
            field = CALLS[kind]
            arguments = call.get("function", {}).get("arguments") if isinstance(call.get("function"), dict) else None
            if field and isinstance(arguments, str) and arguments != item.get(field):
                out.append({**item, field: arguments})
            else:
                out.append(item)
        else:
            field = OUTPUTS.get(kind or "")
            if field and changed_content:
                out.append({**item, field: _item_content(message.get("content"), item.get(field), "input_text")})
            else:
                out.append(item)
    # Calls a strategy added (none of the built-in ones do) are function calls of their own.
    out.extend(_function_call(call) for call in calls.values())
    return out


def _new_items(message: Message) -> list[Any]:
    """Items for a message a strategy made: a message item, its calls as function calls, a result as their output."""
    role = message.get("role")
    content = message.get("content")
    if role == "tool":
        output = _item_content(content, None, "input_text")
        return [{"type": "function_call_output", "call_id": message.get("tool_call_id"), "output": output}]
    items: list[Any] = []
    if content:
        items.append({"type": "message", "role": role, "content": _item_content(content, None, _text_type(role))})
    items.extend(_function_call(call) for call in tool_calls_of(message))
    return items


def _function_call(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function")
    function = function if isinstance(function, dict) else {}
    return {
        "type": "function_call",
        "call_id": call.get("id"),
        "name": function.get("name"),
        "arguments": function.get("arguments", ""),
    }
