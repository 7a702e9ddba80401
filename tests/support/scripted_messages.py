"""A stand-in Anthropic model on loopback whose answers a test scripts: each Messages request is handed to a function
that says what the model writes (its content blocks: signed thinking, text, tool uses), answered whole or streamed
in Anthropic's events (tests.support.messages_upstream.message_events).

It remembers every turn it wrote, so a test can check that what it is sent back is exactly that, turn by turn:
`foreign_turns` lists the assistant messages of a request holding a thinking block it signed that are not one of its
turns as it wrote it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.messages_upstream import message_events, signature

USAGE = {"input_tokens": 100, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 40, "output_tokens": 10}


def thinking(text: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": signature(text)}


def redacted(data: str) -> dict[str, Any]:
    return {"type": "redacted_thinking", "data": data}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def use(id: str, name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": tool_input}


@dataclass
class Reply:
    """What the model writes on one request; stop_reason from its blocks unless given."""

    blocks: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None
    status: int = 200  # anything else: an error answer in Anthropic's shape


Script = Callable[[dict[str, Any]], Reply]


class ScriptedMessages:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.received: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.written: list[bytes] = []  # every turn it wrote, as JSON
        self.hold: threading.Event | None = None  # set: a stream waits for it before its message_delta
        self.app = Starlette(routes=[Route("/v1/messages", self.handle, methods=["POST"])])

    async def handle(self, request: Request) -> Response:
        payload = json.loads(await request.body())
        self.received.append(payload)
        self.headers.append(dict(request.headers))
        reply = self.script(payload)
        number = len(self.received)
        if reply.status != 200:
            error = {"type": "error", "error": {"type": "overloaded_error", "message": f"scripted {reply.status}"}}
            return JSONResponse(error, reply.status, headers={"request-id": f"req_{number}"})
        stop = reply.stop_reason or ("tool_use" if any(b["type"] == "tool_use" for b in reply.blocks) else "end_turn")
        self.written.append(orjson.dumps(reply.blocks))
        answer = {
            "id": f"msg_{number:04}",
            "type": "message",
            "role": "assistant",
            "model": payload.get("model"),
            "content": reply.blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": USAGE,
        }
        if not payload.get("stream"):
            return JSONResponse(answer, headers={"request-id": f"req_{number}"})

        async def events() -> AsyncIterator[bytes]:
            for event in message_events(answer):
                if event.startswith(b"event: message_delta") and self.hold is not None:
                    await anyio.to_thread.run_sync(self.hold.wait, 30)  # the round's end, when the test lets it
                yield event

        return StreamingResponse(events(), media_type="text/event-stream", headers={"request-id": f"req_{number}"})

    def foreign_turns(self, payload: dict[str, Any]) -> list[int]:
        """The assistant messages holding a thinking block this model signed that are not a turn as it wrote it."""
        written = {orjson.dumps(_sorted(orjson.loads(turn))) for turn in self.written}
        return [
            index
            for index, message in enumerate(payload.get("messages", []))
            if message.get("role") == "assistant"
            and isinstance(message.get("content"), list)
            and any(
                b.get("type") == "thinking" and b.get("thinking", "").startswith("Model:") for b in message["content"]
            )
            and orjson.dumps(_sorted(message["content"])) not in written
        ]


def _sorted(value: Any) -> Any:
    """A JSON value as bytes compare it whatever a client did to its keys' order (Python's SDK sorts them)."""
    return orjson.loads(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
