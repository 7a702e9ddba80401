"""Wire formats: between a request body and the conversation the strategies see, and back.

The strategies work on chat messages (strategies.messages, strategies.conversation). A wire format parses a body
into those messages plus what else a strategy may read (the model, tools, max_tokens), and renders the
compacted messages back into a body of its own shape; what a strategy did not change goes out as it came.
OpenAI's chat completions (wire.chat) is the format the messages already are; the Responses API (wire.responses) and
Anthropic's Messages API (wire.anthropic) map their items to messages and back, so one set of strategies serves all
three. Everything else that differs per API is the format's too (wire.base.WireFormat). JSON itself, in and out, is
wire.json_body.
"""

from __future__ import annotations

from typing import Any

from app.wire.anthropic import AnthropicMessages
from app.wire.base import Parsed, WireFormat
from app.wire.chat import ChatCompletions
from app.wire.json_body import dump_body, dump_json, parse_object
from app.wire.openai import openai_error_body
from app.wire.responses import Responses

FORMATS = (ChatCompletions, Responses, AnthropicMessages)
# Every format's name (WireFormat.name): the one value that names it wherever one must, e.g. a metric's label.
WIRE_NAMES = tuple(f.name for f in FORMATS)
# Longest first, so that /compact/messages is the Messages dry run's, not below chat's /compact.
_ROUTES = sorted(((p, f) for f in FORMATS for p in (f.path, f.dry_run_path)), key=lambda pf: -len(pf[0]))


def wire_formats() -> tuple[WireFormat, ...]:
    """One of each format, for the routes' table (app.routes.compacted)."""
    return (ChatCompletions(), Responses(), AnthropicMessages())


def error_body(
    path: str, status: int, message: str, *, type: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """The one place an error's shape is decided, by the route it answers (`path`, without the query): the shape of
    the format whose route, dry run or paths below them it is (/v1/messages/count_tokens is Anthropic's), else
    OpenAI's.
    """
    for route, wire in _ROUTES:
        if path == route or path.startswith(route + "/"):
            return wire.error_body(status, message, type=type, param=param, code=code)
    return openai_error_body(status, message, type=type, param=param, code=code)


__all__ = [
    "FORMATS",
    "WIRE_NAMES",
    "AnthropicMessages",
    "ChatCompletions",
    "Parsed",
    "Responses",
    "WireFormat",
    "dump_body",
    "dump_json",
    "error_body",
    "parse_object",
    "wire_formats",
]
