"""A stand-in model on loopback whose answers a test scripts: each chat completion request is handed to a function
that says what the model does (say something, call tools), answered whole or streamed in the API's chunk shapes,
tool-call deltas split across chunks as OpenAI sends them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

USAGE = {
    "prompt_tokens": 100,
    "completion_tokens": 10,
    "total_tokens": 110,
    "prompt_tokens_details": {"cached_tokens": 40},
}


@dataclass
class Turn:
    """What the model does on one request: text, then tool calls ((id, name, arguments) each)."""

    text: str | None = None
    calls: list[tuple[str, str, str]] = field(default_factory=list)
    status: int = 200  # anything else: an error answer in OpenAI's shape


Script = Callable[[dict[str, Any]], Turn]


class ScriptedModel:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.received: list[dict[str, Any]] = []
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.handle, methods=["POST"])])

    async def handle(self, request: Request) -> Response:
        payload = json.loads(await request.body())
        self.received.append(payload)
        turn = self.script(payload)
        number = len(self.received)
        if turn.status != 200:
            error = {"message": f"scripted failure {turn.status}", "type": "server_error", "param": None, "code": None}
            return JSONResponse({"error": error}, turn.status, headers={"x-request-id": f"req_{number}"})
        if payload.get("stream"):
            options = payload.get("stream_options") or {}
            return StreamingResponse(
                self.chunks(turn, number, bool(options.get("include_usage"))), media_type="text/event-stream"
            )
        message: dict[str, Any] = {"role": "assistant", "content": turn.text}
        if turn.calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}
                for cid, name, arguments in turn.calls
            ]
        answer = {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "created": number,
            "model": payload.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if turn.calls else "stop"}],
            "usage": USAGE,
        }
        return JSONResponse(answer, headers={"x-request-id": f"req_{number}"})

    async def chunks(self, turn: Turn, number: int, include_usage: bool) -> AsyncIterator[bytes]:
        base = {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": number, "model": "m"}

        def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return f"data: {json.dumps({**base, 'choices': [choice], **extra})}\n\n".encode()

        yield event({"role": "assistant", "content": ""})
        for word in (turn.text or "").split(" ") if turn.text else []:
            yield event({"content": word + " "})
        for index, (cid, name, arguments) in enumerate(turn.calls):
            head = {"index": index, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
            yield event({"tool_calls": [head]})
            half = len(arguments) // 2
            for piece in (arguments[:half], arguments[half:]):
                yield event({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield event({}, "tool_calls" if turn.calls else "stop")
        if include_usage:
            yield f"data: {json.dumps({**base, 'choices': [], 'usage': USAGE})}\n\n".encode()
        yield b"data: [DONE]\n\n"
