"""Request bodies in and out: JSON, and the wire formats between a body and the conversation the strategies see.

JSON: orjson for speed, the stdlib for what orjson refuses (lone surrogates). Nesting is bounded right after
parsing (max_json_depth): orjson cannot write back more than 255 levels, the stdlib's fallback parser recurses,
and so does any code that walks a body. Deeper bodies are refused up front.

The strategies work on chat messages (strategies.messages, strategies.conversation). A wire format parses a body
into those messages plus what else a strategy may read (the model, tools, max_tokens), and renders the
compacted messages back into a body of its own shape; what a strategy did not change goes out as it came.
OpenAI's chat completions is the format the messages already are; the Responses API and Anthropic's Messages
API will map their items to messages and back the same way, so one set of strategies serves all three.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from strategies import Message

from .errors import ApiError
from .settings import DEFAULT_MAX_JSON_DEPTH

_CONTAINERS = (dict, list)


def too_deep(limit: int) -> ApiError:
    return ApiError(
        400,
        f"The request body nests arrays and objects deeper than this proxy accepts ({limit} levels; setting "
        "max_json_depth).",
        code="too_deep",
    )


def check_depth(value: Any, limit: int) -> None:
    """Raises a 400 too_deep ApiError if containers nest more than `limit` levels (the body itself is level 1).

    One level at a time, without recursion, looking only at containers (strings are never looked into): 0.25 ms
    for a 2.25 MB agent history that orjson parses in 0.9 ms; 30-120 ms for 2 MB of nothing but tiny containers,
    a fraction of the 180-430 ms that parsing them took.
    """
    level = [value] if type(value) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            raise too_deep(limit)
        level = [
            child
            for node in level
            for child in (node.values() if type(node) is dict else node)
            if type(child) in _CONTAINERS
        ]


def parse_object(raw: bytes, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> tuple[dict[str, Any], bool]:
    """The body as a JSON object, nested at most max_depth levels (settings.max_json_depth); a 400 ApiError
    otherwise. Returns it and whether the stdlib had to parse it (then it must also write it back).
    """
    try:
        body, strict = orjson.loads(raw), True
    except orjson.JSONDecodeError:
        # orjson refuses lone surrogates, which the stdlib reads, and nesting past 1024 levels, where the
        # stdlib's recursion gives up too.
        try:
            body, strict = json.loads(raw), False
        except RecursionError:
            raise too_deep(max_depth) from None
        except ValueError as exc:
            raise ApiError(400, f"The request body is not valid JSON: {exc}", code="invalid_json") from None
    check_depth(body, max_depth)
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_json")
    return body, not strict


def dump_body(body: dict[str, Any], stdlib: bool) -> bytes:
    if stdlib:
        return _stdlib_dumps(body)
    return orjson.dumps(body)


def dump_json(value: Any) -> bytes:
    """Any JSON value the proxy answers with itself (the /compact answer), also when it holds text from a body
    that only the stdlib could read: orjson first, the stdlib for what orjson refuses to write.
    """
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return _stdlib_dumps(value)


def _stdlib_dumps(value: Any) -> bytes:
    # ASCII escapes keep a lone surrogate as the \udXXX escape the client sent, and the body valid UTF-8.
    return json.dumps(value, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Parsed:
    body: dict[str, Any]  # the whole body, as parsed
    messages: list[Message]  # the conversation the strategies see
    model: str
    request: dict[str, Any]  # the rest of the body a strategy may read (tools, max_tokens, ...)
    stdlib: bool  # read by the stdlib's parser, so written back by it (lone surrogates)


class WireFormat(Protocol):
    name: str

    def parse(self, raw: bytes, max_depth: int) -> Parsed:
        """The body's conversation; a 400 ApiError in the format's own shape when it is not one."""
        ...

    def render(self, parsed: Parsed, messages: list[Message]) -> bytes:
        """The body with these messages in place of the parsed ones."""
        ...


class ChatCompletions:
    """POST /v1/chat/completions: the messages are the body's `messages`, unchanged."""

    name = "chat.completions"

    def parse(self, raw: bytes, max_depth: int) -> Parsed:
        """The fields the proxy acts on are checked: `messages` a list of objects with a string role, `stream`
        a boolean or null. Everything else is left as it came.
        """
        body, stdlib = parse_object(raw, max_depth)
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise ApiError(
                400,
                "'messages' is required and must be an array of message objects.",
                param="messages",
                code="invalid_messages",
            )
        for index, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise ApiError(
                    400,
                    f"messages[{index}] must be an object with a string 'role'.",
                    param=f"messages[{index}]",
                    code="invalid_messages",
                )
        stream = body.get("stream")
        # OpenAI accepts true, false or null; "yes" or 1 would be read as true by some upstreams and false by others.
        if stream is not None and not isinstance(stream, bool):
            raise ApiError(
                400,
                f"Invalid type for 'stream': expected a boolean, but got {_json_type(stream)} instead.",
                param="stream",
                code="invalid_type",
            )
        model = body.get("model")
        request = {k: v for k, v in body.items() if k != "messages"}
        return Parsed(body, messages, model if isinstance(model, str) else "", request, stdlib)

    def render(self, parsed: Parsed, messages: list[Message]) -> bytes:
        return dump_body({**parsed.body, "messages": messages}, parsed.stdlib)


def _json_type(value: Any) -> str:
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    return "an object"
