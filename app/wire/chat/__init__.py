"""OpenAI's chat completions: the body's `messages` are the conversation, as they are; the expand tool is a function
tool (expand).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.edge.errors import ApiError
from app.settings import Api
from app.wire.base import ExpandTool, Parsed
from app.wire.chat.expand import ChatExpandTool
from app.wire.json_body import dump_body, dump_json, parse_object
from app.wire.openai import check_stream, openai_error_body
from strategies import Message
from strategies.messages import WIRE_KEY


class ChatCompletions:
    """POST /v1/chat/completions: the messages are the body's `messages`, unchanged."""

    name = "chat.completions"
    path = "/v1/chat/completions"
    dry_run_path = "/compact"
    api: Api = "openai"
    upstream_path = "chat/completions"
    error_body = staticmethod(openai_error_body)

    def __init__(self) -> None:
        self.expand: ExpandTool | None = ChatExpandTool()

    def for_request(self, headers: Mapping[str, str]) -> ChatCompletions:
        return self

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
        return Parsed(body, _without_wire_keys(messages), model if isinstance(model, str) else "", request, stdlib)

    def settle(self, parsed: Parsed, messages: list[Message]) -> list[Message]:
        return messages  # any valid conversation the strategies leave is one chat completions takes

    def render(self, parsed: Parsed, messages: list[Message]) -> bytes:
        return dump_body({**parsed.body, "messages": messages}, parsed.stdlib)

    def dry_run_fields(self, sent: dict[str, Any]) -> dict[str, Any]:
        return {"messages": sent.get("messages", [])}

    def stream_error_event(self, message: str, code: str) -> bytes:
        # The openai SDK raises APIError on a chunk with an "error" key; no [DONE] follows.
        error = {"message": message, "type": "upstream_error", "param": None, "code": code}
        return b"data: " + dump_json({"error": error}) + b"\n\n"


def _without_wire_keys(messages: list[Message]) -> list[Message]:
    """The messages without WIRE_KEY, the proxy's own key for what a wire format carries unseen: from a client it is
    a field the upstream ignores, which must neither be counted (a claim of a million unseen tokens) nor teach the
    calibration anything. A message that has none is itself, so an unchanged request still goes byte for byte.
    """
    if not any(WIRE_KEY in m for m in messages):
        return messages
    return [{k: v for k, v in m.items() if k != WIRE_KEY} if WIRE_KEY in m else m for m in messages]
