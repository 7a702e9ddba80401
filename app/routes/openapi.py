"""What /openapi.json says about the compacted routes, which read their own bodies (/v1/chat/completions,
/v1/responses, /v1/messages and their dry runs /compact, /compact/responses, /compact/messages).

Those routes parse the raw bytes themselves (speed, lone surrogates, untouched forwarding), so FastAPI cannot
infer a request schema: it is declared here as JSON Schema. Only `messages` (an array of objects with a
string `role`) and `stream` (a boolean or null) are enforced by the proxy; the other fields are described as
OpenAI defines them and forwarded as sent, so every object allows properties not listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

_ANY_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}

CONTENT_PART: dict[str, Any] = {
    "type": "object",
    "description": "A content part, e.g. {'type': 'text', 'text': '...'} or {'type': 'image_url', ...}.",
    "properties": {"type": {"type": "string"}, "text": {"type": "string"}},
    "required": ["type"],
    "additionalProperties": True,
}

TOOL_CALL: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "type": {"type": "string", "examples": ["function"]},
        "function": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "arguments": {"type": "string"}},
            "additionalProperties": True,
        },
    },
    "required": ["id", "type", "function"],
    "additionalProperties": True,
}

MESSAGE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "role": {
            "type": "string",
            "description": "system, developer, user, assistant, tool or function.",
            "examples": ["user"],
        },
        "content": {
            "anyOf": [{"type": "string"}, {"type": "array", "items": CONTENT_PART}, {"type": "null"}],
            "description": "Text, a list of content parts, or null (an assistant message with tool calls).",
        },
        "name": {"type": "string"},
        "tool_calls": {"type": "array", "items": TOOL_CALL},
        "tool_call_id": {"type": "string", "description": "On a tool message: the call it answers."},
        "function_call": _ANY_OBJECT,
    },
    "required": ["role"],
    "additionalProperties": True,
}

CHAT_REQUEST: dict[str, Any] = {
    "type": "object",
    "properties": {
        "model": {"type": "string", "examples": ["gpt-4o"]},
        "messages": {"type": "array", "items": MESSAGE},
        "stream": {"type": ["boolean", "null"], "description": "Strictly a boolean: 'yes' or 1 is a 400."},
        "stream_options": {"type": ["object", "null"], "additionalProperties": True},
        "tools": {"type": "array", "items": _ANY_OBJECT},
        "max_tokens": {"type": ["integer", "null"]},
        "max_completion_tokens": {"type": ["integer", "null"]},
    },
    "required": ["messages"],
    "additionalProperties": True,
}

RESPONSES_REQUEST: dict[str, Any] = {
    "type": "object",
    "properties": {
        "model": {"type": "string", "examples": ["gpt-5"]},
        "input": {
            "anyOf": [{"type": "string"}, {"type": "array", "items": _ANY_OBJECT}, {"type": "null"}],
            "description": "Text (one user message) or a list of items, each an object; every item the strategies "
            "did not change is forwarded as sent.",
        },
        "instructions": {"type": ["string", "null"]},
        "stream": CHAT_REQUEST["properties"]["stream"],
        "previous_response_id": {"type": ["string", "null"], "description": "Only `input` is compacted."},
        "tools": {"type": "array", "items": _ANY_OBJECT},
        "max_output_tokens": {"type": ["integer", "null"]},
    },
    "additionalProperties": True,
}

STRATEGIES_PARAMETER: dict[str, Any] = {
    "name": "X-Compaction-Strategies",
    "in": "header",
    "required": False,
    "description": "The chain for this request: name or name(key=value, ...), comma-separated; 'none' = off.",
    "schema": {"type": "string"},
}


def _request(description: str, schema: dict[str, Any] = CHAT_REQUEST) -> dict[str, Any]:
    return {
        "parameters": [STRATEGIES_PARAMETER],
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"application/json": {"schema": schema}},
        },
    }


CHAT_OPENAPI = _request("An OpenAI chat completion request; everything but `messages` is forwarded as sent.")
CHAT_DRY_RUN_OPENAPI = _request("The same body as /v1/chat/completions.")
RESPONSES_OPENAPI = _request(
    "An OpenAI Responses request; everything but `input` and `instructions` is forwarded as sent.", RESPONSES_REQUEST
)
RESPONSES_DRY_RUN_OPENAPI = _request("The same body as /v1/responses.", RESPONSES_REQUEST)


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(BaseModel):
    """OpenAI's error shape, used by every error the proxy itself answers."""

    error: ErrorDetail


class CompactStep(BaseModel):
    # A strategy may report more (e.g. `overflow`, `pattern_timeouts`).
    model_config = ConfigDict(extra="allow")

    strategy: str
    tokens_before: int
    tokens_after: int
    ms: float


class ChatDryRun(BaseModel):
    messages: list[dict[str, Any]] = Field(description="What /v1/chat/completions would send upstream.")
    tokens_before: int
    tokens_after: int
    added_tools: list[dict[str, Any]] = Field(
        description="Tools the proxy would add after the client's: the expand tool, when the messages sent hold a "
        "stub with a ref."
    )
    steps: list[CompactStep]


class ResponsesDryRun(BaseModel):
    input: list[dict[str, Any]] | str | None = Field(description="The `input` /v1/responses would send upstream.")
    instructions: Any = Field(description="Its `instructions`, as sent.")
    tokens_before: int
    tokens_after: int
    added_tools: list[dict[str, Any]] = Field(
        description="Tools the proxy would add after the client's, in the Responses API's shape: the expand tool (a "
        "function tool), when the input sent holds a stub with a ref."
    )
    steps: list[CompactStep]


def _header(description: str, type: str = "string") -> dict[str, Any]:
    return {"description": description, "required": True, "schema": {"type": type}}


COMPACTION_HEADERS = {
    "X-Compaction-Strategies": _header("The chain that ran, with the parameters the request set."),
    "X-Compaction-Tokens-Before": _header("Prompt tokens before compaction.", "integer"),
    "X-Compaction-Tokens-After": _header("Prompt tokens after compaction.", "integer"),
    "X-Compaction-Request-Id": _header("The client's X-Request-Id, else a generated one."),
}


# In OpenAPI 3.1 the schema of an event stream describes each event.
SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "description": "One server-sent event as the upstream sent it: `data` holds a chat.completion.chunk as JSON, "
    "then [DONE] (a Responses stream event, on /v1/responses); or an OpenAI-shaped error, with no [DONE] (an `error` "
    "event), when the upstream broke off or went quiet.",
    "properties": {"data": {"type": "string"}, "event": {"type": "string"}, "id": {"type": "string"}},
    "additionalProperties": True,
}


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorResponse, "description": description}


ERRORS: dict[int | str, dict[str, Any]] = {
    400: _error(
        "Malformed JSON, a body that is not an object or nested deeper than max_json_depth (code too_deep), bad "
        "`messages`, `input` or `stream`, or a bad strategy header."
    ),
    401: _error("Proxy keys are configured and the request has none or a wrong one."),
    408: _error("The body sent nothing for request_body_timeout_seconds (code request_timeout)."),
    413: _error("The body is larger than max_body_bytes."),
    500: _error(
        "A strategy failed and on_strategy_error is 'fail' (code compaction_failed), or the proxy itself failed "
        "(code internal_error)."
    ),
}

CHAT_DRY_RUN_STATUSES: dict[int | str, dict[str, Any]] = {
    200: {"model": ChatDryRun, "description": "What would be sent upstream.", "headers": COMPACTION_HEADERS},
    **ERRORS,
}

RESPONSES_DRY_RUN_STATUSES: dict[int | str, dict[str, Any]] = {
    200: {"model": ResponsesDryRun, "description": "What would be sent.", "headers": COMPACTION_HEADERS},
    **ERRORS,
}

CHAT_STATUSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The upstream's answer, relayed as it arrives: JSON, or server-sent events when streaming.",
        "headers": {
            **COMPACTION_HEADERS,
            # Not on /compact (a dry run neither reads nor writes the tracker), nor with prefix_tracking off.
            "X-Compaction-Prefix": {
                "description": "What the forwarded request did to the provider's prompt cache: new (first request "
                "of the conversation), extends (the previous request's forwarded messages are its prefix), breaks, "
                "or unknown (the cache failed). Absent when prefix_tracking is off.",
                "required": False,
                "schema": {"type": "string", "enum": ["new", "extends", "breaks", "unknown"]},
            },
        },
        "content": {"application/json": {"schema": _ANY_OBJECT}, "text/event-stream": {"schema": SSE_EVENT}},
    },
    **ERRORS,
    502: _error("The upstream cannot be reached (code upstream_unreachable)."),
    504: _error("The upstream did not answer in time (code upstream_timeout)."),
    "default": {
        "description": "An error answered by the upstream, passed through unchanged (status, body and headers).",
        "content": {"application/json": {"schema": {}}},
    },
}


# --- Anthropic's Messages API (/v1/messages, /compact/messages): its body, its error shape ------------------------

_BLOCKS: dict[str, Any] = {"type": "array", "items": {"type": "object", "additionalProperties": True}}
MESSAGES_REQUEST: dict[str, Any] = {
    "type": "object",
    "properties": {
        "model": {"type": "string", "examples": ["claude-sonnet-4-5"]},
        "max_tokens": {"type": "integer"},
        "system": {"anyOf": [{"type": "string"}, _BLOCKS]},
        "messages": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "role": {"type": "string", "enum": ["user", "assistant", "system"]},
                    "content": {"anyOf": [{"type": "string"}, _BLOCKS]},
                },
                "required": ["role", "content"],
                "additionalProperties": True,
            },
        },
        "stream": {"type": "boolean"},
        "tools": {"type": "array", "items": _ANY_OBJECT},
    },
    "required": ["messages"],
    "additionalProperties": True,
}


class AnthropicErrorDetail(BaseModel):
    type: str
    message: str


class AnthropicErrorResponse(BaseModel):
    """Anthropic's error shape, used by every error the proxy itself answers on /v1/messages and /compact/messages."""

    type: str
    error: AnthropicErrorDetail


class MessagesDryRun(BaseModel):
    system: str | list[dict[str, Any]] | None = Field(description="The `system` /v1/messages would send.")
    messages: list[dict[str, Any]] = Field(description="The `messages` /v1/messages would send.")
    tokens_before: int
    tokens_after: int
    steps: list[CompactStep]


def _messages_request(description: str) -> dict[str, Any]:
    request = _request(description)
    request["requestBody"]["content"] = {"application/json": {"schema": MESSAGES_REQUEST}}
    return request


MESSAGES_OPENAPI = _messages_request(
    "An Anthropic Messages request; everything but `system` and `messages` is forwarded as sent."
)
MESSAGES_DRY_RUN_OPENAPI = _messages_request("The same body as /v1/messages.")
_ANTHROPIC_ERRORS = {
    status: {**error, "model": AnthropicErrorResponse} for status, error in CHAT_STATUSES.items() if status != 200
}
_ANTHROPIC_ERRORS["default"] = CHAT_STATUSES["default"]
MESSAGES_STATUSES: dict[int | str, dict[str, Any]] = {
    200: {
        **CHAT_STATUSES[200],
        "description": "The upstream's answer, relayed as it arrives: JSON, or Anthropic's server-sent events.",
    },
    **_ANTHROPIC_ERRORS,
}
MESSAGES_DRY_RUN_STATUSES: dict[int | str, dict[str, Any]] = {
    200: {
        "model": MessagesDryRun,
        "description": "What would be sent upstream.",
        "headers": COMPACTION_HEADERS,
    },
    **{status: error for status, error in _ANTHROPIC_ERRORS.items() if status in ERRORS},
}
RESPONSES_STATUSES = CHAT_STATUSES  # the upstream's answer relayed, or the proxy's own errors, as for chat


@dataclass(frozen=True)
class RouteDocs:
    """What /openapi.json says of one wire format's route and its dry run."""

    request: dict[str, Any]
    statuses: dict[int | str, dict[str, Any]]
    dry_run_request: dict[str, Any]
    dry_run_statuses: dict[int | str, dict[str, Any]]


# By wire format name (app.wire): a new format's routes are documented here.
DOCS = {
    "chat.completions": RouteDocs(CHAT_OPENAPI, CHAT_STATUSES, CHAT_DRY_RUN_OPENAPI, CHAT_DRY_RUN_STATUSES),
    "responses": RouteDocs(
        RESPONSES_OPENAPI, RESPONSES_STATUSES, RESPONSES_DRY_RUN_OPENAPI, RESPONSES_DRY_RUN_STATUSES
    ),
    "messages": RouteDocs(MESSAGES_OPENAPI, MESSAGES_STATUSES, MESSAGES_DRY_RUN_OPENAPI, MESSAGES_DRY_RUN_STATUSES),
}
