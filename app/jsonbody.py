"""Request bodies in and out: orjson for speed, the stdlib for what orjson refuses (lone surrogates)."""

from __future__ import annotations

import json
from typing import Any

import orjson

from .errors import ApiError


def parse_chat_body(raw: bytes) -> tuple[dict[str, Any], bool]:
    """The body as a dict whose `messages` is a list of objects with a string role and whose `stream`,
    if present, is a boolean or null: the fields the proxy acts on. Everything else is left as it came.

    Returns the body and whether the stdlib had to parse it (then it must also write it back).
    """
    try:
        body, strict = orjson.loads(raw), True
    except orjson.JSONDecodeError:
        try:
            body, strict = json.loads(raw), False
        except ValueError as exc:
            raise ApiError(400, f"The request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_json")
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
    return body, not strict


def _json_type(value: Any) -> str:
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    return "an object"


def dump_body(body: dict[str, Any], stdlib: bool) -> bytes:
    if stdlib:
        # ASCII escapes keep a lone surrogate as the \udXXX escape the client sent, and the body valid UTF-8.
        return json.dumps(body, separators=(",", ":")).encode()
    return orjson.dumps(body)
