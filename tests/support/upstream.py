"""A stand-in for the OpenAI API, and for Anthropic's Messages API under /v1/messages (tests.support.messages_upstream),
that the tests own: answers JSON or SSE and records what it received.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from bench.notes.stand_in import digest
from tests.support.messages_upstream import MESSAGES_HEADERS, cut, message, message_events, refusal
from tests.support.tokenizer import StandInTokenizer

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
    # A compacted request's prompt tokens by the stand-in's own tokenizer (what its usage or refusal states).
    prompt_tokens: int | None = None

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Canned:
    """A fixed answer for the next requests: status, headers, body bytes."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    # Send only this many bytes of the body, then close the connection mid-message.
    cut_after: int | None = None


@dataclass
class Behaviour:
    """How the stand-in plays a server with a tokenizer and a context window of its own (vLLM, llama.cpp, ...).

    It always counts with its own tokenizer (tests.support.tokenizer), never the proxy's. token_ratio: its model's
    tokens per token of that tokenizer (1.6: a vocabulary making 60% more tokens), as its usage and refusals state
    them; context_window: a prompt whose tokens plus the answer's max tokens are over it is refused in `overflow`'s
    words (None: any prompt fits); listing: extra /v1/models entries; props: the /props answer (None: 404).
    """

    token_ratio: float = 1.0
    context_window: int | None = None
    # openai, anthropic, vllm, llama.cpp, openrouter; llama-cpp-python: OpenAI's words, but a stream is answered 200
    # and closed before its first byte; None: the API's own (Anthropic's for /v1/messages, OpenAI's otherwise)
    overflow: str | None = None
    listing: list[dict[str, Any]] = field(default_factory=list)
    props: dict[str, Any] | None = None


def overflow_answer(style: str, window: int, prompt: int, output: int) -> Response:
    """A refusal of `prompt` tokens (plus `output` for the answer) over `window`, as each server words it."""
    if style == "anthropic":
        if prompt > window:
            text = f"prompt is too long: {prompt} tokens > {window} maximum"
        else:
            text = (
                f"input length and `max_tokens` exceed context limit: {prompt} + {output} > {window}, decrease input "
                "length or `max_tokens` and try again"
            )
        refusal = {"type": "error", "error": {"type": "invalid_request_error", "message": text}}
        return JSONResponse(refusal, 400, headers=MESSAGES_HEADERS)
    if style == "llama.cpp":  # llama.cpp's own server
        error = {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt,
            "n_ctx": window,
        }
        return JSONResponse({"error": error}, 400)
    if style == "openrouter":
        message = (
            f"This endpoint's maximum context length is {window} tokens. However, you requested about "
            f"{prompt + output} tokens ({prompt} of text input, {output} in the output). Please reduce the length of "
            'either one, or use the "middle-out" transform to compress your prompt automatically.'
        )
        return JSONResponse({"error": {"message": message, "code": 400}}, 400)
    message = (  # OpenAI's words, which vLLM and llama-cpp-python's server use too
        f"This model's maximum context length is {window} tokens. However, you requested {prompt + output} tokens "
        f"({prompt} in the messages, {output} in the completion). Please reduce the length of the messages or "
        "completion."
    )
    code = "context_length_exceeded" if style == "openai" else None
    error = {"message": message, "type": "invalid_request_error", "param": "messages", "code": code}
    return JSONResponse({"error": error}, 400)


def sse_chunks(model: str, include_usage: bool, prompt_tokens: int = 11) -> list[bytes]:
    base = {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 1, "model": model}
    deltas = [{"role": "assistant", "content": ""}, {"content": "Hello"}, {"content": " world"}]
    events = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if include_usage:
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 2, "total_tokens": prompt_tokens + 2}
        events.append({**base, "choices": [], "usage": usage})
    return [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]


def response_object(model: str, text: str, status: str = "completed", input_tokens: int = 11) -> dict[str, Any]:
    """A Responses API response with one assistant message."""
    message = {
        "id": "msg_standin",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return {
        "id": "resp_standin",
        "object": "response",
        "created_at": 1,
        "status": status,
        "model": model,
        "output": [message] if status == "completed" else [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": input_tokens, "output_tokens": 2, "total_tokens": input_tokens + 2}
        if status == "completed"
        else None,
    }


def responses_events(model: str, text: str, input_tokens: int = 11) -> list[dict[str, Any]]:
    """The events of a streamed Responses answer saying `text` in two deltas."""
    started = response_object(model, text, status="in_progress")
    item = {"id": "msg_standin", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    part = {"type": "output_text", "text": "", "annotations": []}
    done = response_object(model, text, input_tokens=input_tokens)
    half = len(text) // 2
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {
            "type": "response.content_part.added",
            "item_id": "msg_standin",
            "output_index": 0,
            "content_index": 0,
            "part": part,
        },
        *(
            {
                "type": "response.output_text.delta",
                "item_id": "msg_standin",
                "output_index": 0,
                "content_index": 0,
                "delta": delta,
                "logprobs": [],
            }
            for delta in (text[:half], text[half:])
        ),
        {
            "type": "response.output_text.done",
            "item_id": "msg_standin",
            "output_index": 0,
            "content_index": 0,
            "text": text,
            "logprobs": [],
        },
        {"type": "response.output_item.done", "output_index": 0, "item": done["output"][0]},
        {"type": "response.completed", "response": done},
    ]
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def responses_sse(model: str, text: str, input_tokens: int = 11) -> list[bytes]:
    events = responses_events(model, text, input_tokens)
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


class BrokenStream(Response):
    """Sends the status, headers and the first chunks of a stream, then returns without finishing the
    body: uvicorn then closes the connection mid-message, as a crashing or cut-off upstream would.
    """

    media_type = "text/event-stream"  # unless the headers say otherwise

    def __init__(self, chunks: list[bytes], headers: dict[str, str], status: int = 200) -> None:
        # Not Response.__init__: that would announce a Content-Length, and uvicorn would frame the body by it.
        self.status_code = status
        self.background = None
        self.init_headers(headers)
        self.chunks = chunks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        for chunk in self.chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})


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
        # Streams send this many chunks, then the connection is closed mid-stream; None: streams complete.
        self.break_stream_after: int | None = None
        # A Messages stream goes in chunks of this many bytes (messages_upstream.cut); None: an event a chunk.
        self.stream_chunk_bytes: int | None = None
        # Set when a request's body did not arrive whole (the sender gave up on it).
        self.request_abandoned = threading.Event()
        # Summariser calls (marked X-Compaction-Internal: summariser) are answered apart from the rest: with
        # bench.notes.stand_in.digest by default, recorded in summariser_calls, not in received.
        self.summariser_calls: list[Received] = []
        self.summariser_status = 200
        self.summariser_gate = threading.Event()  # summariser calls wait for it (shows timeouts, single flight)
        self.reset()
        self.app = Starlette(
            routes=[
                WebSocketRoute("/v1/responses", self.socket),
                Route("/{path:path}", self.handle, methods=["GET", "POST", "DELETE", "PUT"]),
            ]
        )
        # What the WebSocket handshakes carried (headers), and the frames received on them.
        self.socket_handshakes: list[dict[str, str]] = []
        self.socket_frames: list[str | bytes] = []
        # None: accept WebSockets; a status: refuse the handshake with it.
        self.socket_refusal: int | None = None
        # A URL: answer the handshake with a redirect there.
        self.socket_redirect: str | None = None
        self.tokenizer = StandInTokenizer()

    def prompt_tokens(self, body: bytes, wire: str) -> int:
        """The prompt's tokens by this server's own tokenizer, times behaviour.token_ratio."""
        return round(self.tokenizer.count(body, wire) * self.behaviour.token_ratio)

    def reset(self) -> None:
        self.received.clear()
        self.canned = None
        self.stream_gate.set()
        self.stream_abandoned.clear()
        self.answer_gate.set()
        self.break_stream_after = None
        self.stream_chunk_bytes = None
        self.request_abandoned.clear()
        self.summariser_calls.clear()
        self.summariser_status = 200
        self.summariser_gate.set()
        self.socket_handshakes = []
        self.socket_frames = []
        self.socket_refusal = None
        self.socket_redirect = None
        self.behaviour = Behaviour()

    def last(self) -> Received:
        assert self.received, "the upstream received nothing"
        return self.received[-1]

    async def handle(self, request: Request) -> Response:
        try:
            body = await request.body()
        except ClientDisconnect:
            self.request_abandoned.set()
            return Response(status_code=400)  # nobody is left to read it
        if request.headers.get("x-compaction-internal") == "summariser":
            return await self.summarise(Received(request.method, request.url.path, "", dict(request.headers), body))
        path = request.url.path
        compacted_paths = {"/v1/responses": "responses", "/v1/messages": "messages"}
        compacted = request.method == "POST" and (path.endswith("/chat/completions") or path in compacted_paths)
        wire = compacted_paths.get(path, "chat")
        prompt = self.prompt_tokens(body, wire) if compacted else None
        self.received.append(Received(request.method, path, request.url.query, dict(request.headers), body, prompt))
        await anyio.to_thread.run_sync(self.answer_gate.wait)
        canned = self.canned
        if canned is not None:
            if canned.cut_after is not None:
                return BrokenStream([canned.body[: canned.cut_after]], canned.headers, canned.status)
            return Response(canned.body, canned.status, headers=canned.headers)
        behaviour = self.behaviour
        if prompt is not None:  # a request the proxy compacts: answered as a model would
            payload = json.loads(body)
            asked = ("max_completion_tokens", "max_tokens", "max_output_tokens")
            output = next((payload[key] for key in asked if payload.get(key)), 16)
            if behaviour.context_window is not None and prompt + output > behaviour.context_window:
                if behaviour.overflow == "llama-cpp-python" and payload.get("stream"):
                    return BrokenStream([], {"content-type": "text/event-stream; charset=utf-8"})
                style = behaviour.overflow or ("anthropic" if wire == "messages" else "openai")
                return overflow_answer(style, behaviour.context_window, prompt, output)
            if wire == "responses":
                return self.responses(payload, prompt)
            if wire == "messages":
                return self.messages(payload, prompt)
            return self.chat(payload, prompt)
        if path == "/props" and behaviour.props is not None:
            return JSONResponse(behaviour.props)
        if path == "/v1/messages/count_tokens":
            return JSONResponse({"input_tokens": len(body) // 4}, headers=MESSAGES_HEADERS)
        if path.startswith("/v1/responses/"):
            # compact, a stored response, its input items, input tokens, cancel, delete: what arrived, echoed.
            return JSONResponse(
                {"object": "standin.echo", "method": request.method, "path": path}, headers=RESPONSE_HEADERS
            )
        if path.endswith("/models"):
            listed = [{"id": "gpt-4o", "object": "model", "owned_by": "x"}, *behaviour.listing]
            return JSONResponse({"object": "list", "data": listed})
        if path.endswith("/embeddings"):
            data = [{"object": "embedding", "index": 0, "embedding": [0.5, 0.25]}]
            return JSONResponse({"object": "list", "data": data, "model": "e", "usage": {}})
        return JSONResponse({"error": {"message": "no such route", "type": "invalid_request_error"}}, 404)

    async def summarise(self, call: Received) -> Response:
        self.summariser_calls.append(call)
        await anyio.to_thread.run_sync(self.summariser_gate.wait, abandon_on_cancel=True)
        if self.summariser_status != 200:
            error = {"message": "summariser down", "type": "server_error", "param": None, "code": None}
            return JSONResponse({"error": error}, self.summariser_status)
        notes = digest(call.json()["messages"][-1]["content"])
        message = {"role": "assistant", "content": notes}
        answer = {"id": "chatcmpl-notes", "object": "chat.completion", "created": 1, "model": call.json()["model"]}
        return JSONResponse({**answer, "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})

    def chat(self, payload: dict[str, Any], prompt_tokens: int = 11) -> Response:
        model = payload.get("model", "gpt-4o")
        if payload.get("stream"):
            options = payload.get("stream_options")
            include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            chunks = sse_chunks(model, include_usage, prompt_tokens)
            if self.break_stream_after is not None:
                return BrokenStream(chunks[: self.break_stream_after], RESPONSE_HEADERS)
            return StreamingResponse(
                self.stream(chunks),
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
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 3, "total_tokens": prompt_tokens + 3},
        }
        return JSONResponse(answer, headers=RESPONSE_HEADERS)

    def messages(self, payload: dict[str, Any], input_tokens: int = 11) -> Response:
        refused = refusal(payload)
        if refused is not None:
            return JSONResponse(refused, 400, headers=MESSAGES_HEADERS)
        answer = message(payload, input_tokens)
        if not payload.get("stream"):
            return JSONResponse(answer, headers=MESSAGES_HEADERS)
        events = message_events(answer)
        if self.stream_chunk_bytes is not None:
            events = cut(events, self.stream_chunk_bytes)
        if self.break_stream_after is not None:
            return BrokenStream(events[: self.break_stream_after], MESSAGES_HEADERS)
        return StreamingResponse(self.stream(events), media_type="text/event-stream", headers=MESSAGES_HEADERS)

    def responses(self, payload: dict[str, Any], input_tokens: int = 11) -> Response:
        model = payload.get("model", "gpt-5")
        items = payload.get("input")
        text = f"seen {len(items) if isinstance(items, list) else 1} items"
        if payload.get("stream"):
            chunks = responses_sse(model, text, input_tokens)
            if self.break_stream_after is not None:
                return BrokenStream(chunks[: self.break_stream_after], RESPONSE_HEADERS)
            return StreamingResponse(self.stream(chunks), media_type="text/event-stream", headers=RESPONSE_HEADERS)
        return JSONResponse(response_object(model, text, input_tokens=input_tokens), headers=RESPONSE_HEADERS)

    async def socket(self, websocket: WebSocket) -> None:
        """The Responses WebSocket mode: each response.create frame answered with a streamed response's events."""
        self.socket_handshakes.append(dict(websocket.headers))
        if self.socket_refusal is not None:
            error = {"message": "no sockets here", "type": "invalid_request_error", "param": None, "code": None}
            await websocket.send_denial_response(JSONResponse({"error": error}, self.socket_refusal))
            return
        if self.socket_redirect is not None:
            await websocket.send_denial_response(Response(status_code=302, headers={"location": self.socket_redirect}))
            return
        await websocket.accept()
        try:
            while True:
                frame = await websocket.receive_text()
                self.socket_frames.append(frame)
                model = json.loads(frame).get("model", "gpt-5")
                for event in responses_events(model, f"seen frame {len(self.socket_frames)}"):
                    await websocket.send_text(json.dumps(event))
        except WebSocketDisconnect:
            pass

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
