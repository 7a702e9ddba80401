"""OpenAI's conventions, shared by its two formats here (chat completions and Responses): the error shape its SDKs
read, and the `stream` field they both take.
"""

from __future__ import annotations

from typing import Any

from app.edge.errors import ApiError


def openai_error_body(
    status: int, message: str, *, type: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """`{"error": {"message", "type", "param", "code"}}`, as OpenAI's API answers (status: in the HTTP status only)."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


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
    """A JSON value's type as OpenAI's error messages name it ("a string", "an array", ...)."""
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    return "an object"
