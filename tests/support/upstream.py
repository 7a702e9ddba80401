"""A stand-in for the OpenAI API that the tests own: answers JSON or SSE and records what it received."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

RESPONSE_HEADERS = {
    "x-request-id": "req_standin_123",
    "openai-processing-ms": "42",
    "openai-version": "2020-10-01",
    "x-ratelimit-remaining-requests": "99",
    "set-cookie": "__cf_bm=secret; path=/",
    "alt-svc": 'h3=":443"',
}


@dataclass
class Received:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Canned:
    """A fixed answer for the next requests: status, headers, body bytes."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def sse_chunks(model: str, include_usage: bool) -> list[bytes]:
    base = {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 1, "model": model}
    deltas = [{"role": "assistant", "content": ""}, {"content": "Hello"}, {"content": " world"}]
    events = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if include_usage:
        usage = {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}
        events.append({**base, "choices": [], "usage": usage})
    return [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]


class StandInUpstream:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.canned: Canned | None = None
        # Streams stop after their first chunk until this is set (shows the proxy does not buffer).
        self.stream_gate = threading.Event()
        # Set when a stream's consumer went away before the stream finished.
        self.stream_abandoned = threading.Event()
        # Requests wait for this before answering (shows timeouts); set by reset().
        self.answer_gate = threading.Event()
        self.reset()
        self.app = Starlette(routes=[Route("/{path:path}", self.handle, methods=["GET", "POST", "DELETE", "PUT"])])

    def reset(self) -> None:
        self.received.clear()
        self.canned = None
        self.stream_gate.set()
        self.stream_abandoned.clear()
        self.answer_gate.set()

    def last(self) -> Received:
        assert self.received, "the upstream received nothing"
        return self.received[-1]

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        self.received.append(Received(request.method, request.url.path, request.url.query, dict(request.headers), body))
        await anyio.to_thread.run_sync(self.answer_gate.wait)
        if self.canned is not None:
            return Response(self.canned.body, self.canned.status, headers=self.canned.headers)
        path = request.url.path
        if path.endswith("/chat/completions") and request.method == "POST":
            return self.chat(json.loads(body))
        if path.endswith("/models"):
            return JSONResponse({"object": "list", "data": [{"id": "gpt-4o", "object": "model", "owned_by": "x"}]})
        if path.endswith("/embeddings"):
            data = [{"object": "embedding", "index": 0, "embedding": [0.5, 0.25]}]
            return JSONResponse({"object": "list", "data": data, "model": "e", "usage": {}})
        return JSONResponse({"error": {"message": "no such route", "type": "invalid_request_error"}}, 404)

    def chat(self, payload: dict[str, Any]) -> Response:
        model = payload.get("model", "gpt-4o")
        if payload.get("stream"):
            include_usage = bool((payload.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                self.stream(sse_chunks(model, include_usage)),
                media_type="text/event-stream",
                headers=RESPONSE_HEADERS,
            )
        answer = {
            "id": "chatcmpl-standin",
            "object": "chat.completion",
            "created": 1,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": f"seen {len(payload['messages'])} messages"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
        }
        return JSONResponse(answer, headers=RESPONSE_HEADERS)

    async def stream(self, chunks: list[bytes]) -> AsyncIterator[bytes]:
        finished = False
        try:
            for index, chunk in enumerate(chunks):
                yield chunk
                if index == 0:
                    await anyio.to_thread.run_sync(self.stream_gate.wait, abandon_on_cancel=True)
            finished = True
        finally:
            if not finished:
                self.stream_abandoned.set()
