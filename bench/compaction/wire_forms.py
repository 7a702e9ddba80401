"""The benchmark's requests in each wire format the proxy compacts. `chat`: the corpus's chat messages as they
are. `responses`: each request as a Responses API body (input items, flat tools), compacted the way the proxy
compacts POST /v1/responses (app.wire.Responses: parse, the chain over its messages, render, the rendered input
checked for its pairs), the chain's messages measured as chat messages, so that everything measured after the
chain (invariants, the prompt cache, what the model can see) is the same code for every format. A format is one
entry of FORMS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

import orjson

from app.settings import DEFAULT_MAX_JSON_DEPTH
from app.wire import Responses
from strategies import Chain, ChainResult, Context, Message
from strategies.invariants import pairing_problems
from strategies.messages import WIRE_KEY

ContextFor = Callable[[Mapping[str, Any]], Context]  # a request's Context, given what a strategy may read of it


class WireForm(Protocol):
    # Whether the proxy offers the expand tool in this format (app.expansion.offer): where it does not, no stub
    # names a ref and mask runs its fallback.
    expandable: bool

    def run(self, chain: Chain, messages: list[Message], request: dict[str, Any], context: ContextFor) -> ChainResult:
        """The chain run over one request in this format; the result's messages as chat messages."""
        ...


class ChatForm:
    expandable = True

    def run(self, chain: Chain, messages: list[Message], request: dict[str, Any], context: ContextFor) -> ChainResult:
        return chain.run(messages, context(request))


class ResponsesForm:
    expandable = False

    def __init__(self) -> None:
        self.wire = Responses()

    def run(self, chain: Chain, messages: list[Message], request: dict[str, Any], context: ContextFor) -> ChainResult:
        raw = orjson.dumps(responses_body(messages, request))
        parsed = self.wire.parse(raw, DEFAULT_MAX_JSON_DEPTH)
        result = chain.run(parsed.messages, context(parsed.request))
        # What the proxy would send, read back: it must pair every call with its output as the messages did.
        sent = self.wire.parse(self.wire.render(parsed, result.messages), DEFAULT_MAX_JSON_DEPTH).messages
        if pairing_problems(sent) != pairing_problems(result.messages):
            raise AssertionError(f"the rendered input pairs differently: {pairing_problems(sent)}")
        # Measured as the chain left them: the items a message item and the calls after it become are one message
        # read back, where the chain may have left two.
        return replace(result, messages=chat_messages(result.messages))


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


FORMS: dict[str, WireForm] = {"chat": ChatForm(), "responses": ResponsesForm()}
