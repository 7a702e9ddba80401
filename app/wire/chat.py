"""OpenAI's chat completions: the body's `messages` are the conversation, as they are."""

from __future__ import annotations

from typing import Any

from strategies import Message

from ..errors import ApiError
from .base import Parsed
from .json_body import dump_body, dump_json, parse_object


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
        check_stream(body)
        model = body.get("model")
        request = {k: v for k, v in body.items() if k != "messages"}
        return Parsed(body, messages, model if isinstance(model, str) else "", request, stdlib)

    def settle(self, parsed: Parsed, messages: list[Message]) -> list[Message]:
        return messages  # any valid conversation the strategies leave is one chat completions takes

    def render(self, parsed: Parsed, messages: list[Message]) -> bytes:
        return dump_body({**parsed.body, "messages": messages}, parsed.stdlib)

    def stream_error_event(self, message: str, code: str) -> bytes:
        # The openai SDK raises APIError on a chunk with an "error" key; no [DONE] follows.
        error = {"message": message, "type": "upstream_error", "param": None, "code": code}
        return b"data: " + dump_json({"error": error}) + b"\n\n"


def check_stream(body: dict[str, Any]) -> None:
    """A 400 ApiError unless `stream` is absent, a boolean or null: OpenAI's APIs accept nothing else, and "yes" or 1
    would be read as true by some upstreams and false by others.
    """
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ApiError(
            400,
            f"Invalid type for 'stream': expected a boolean, but got {json_type(stream)} instead.",
            param="stream",
            code="invalid_type",
        )


def json_type(value: Any) -> str:
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    return "an object"
