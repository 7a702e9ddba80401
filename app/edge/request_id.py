"""A correlation id per request: on every log line written while handling it, and in the response.

Pure ASGI, not BaseHTTPMiddleware: that one runs the endpoint in a task of its own and re-wraps its
response stream, which breaks streaming and the handling of clients that go away.
"""

from __future__ import annotations

import uuid
from contextvars import ContextVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.edge.headers import CLIENT_REQUEST_ID, REQUEST_ID

MAX_LENGTH = 128

# Read by the log formatter. Context variables follow the request into anyio worker threads and tasks.
request_id: ContextVar[str | None] = ContextVar("request_id", default=None)


def sanitise(value: bytes) -> str:
    """The client's id as visible ASCII only (no spaces, controls or escapes to forge log lines with),
    cut to MAX_LENGTH; a fresh uuid4 hex when nothing is left of it.
    """
    kept = bytes(b for b in value if 0x21 <= b <= 0x7E)[:MAX_LENGTH]
    return kept.decode("ascii") if kept else uuid.uuid4().hex


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = [value for name, value in scope["headers"] if name.lower() == CLIENT_REQUEST_ID]
        rid = sanitise(sent[0]) if sent else uuid.uuid4().hex
        # Not reset afterwards on purpose: the server runs each request in a task of its own, whose context
        # dies with it, and its own last lines for this request (an unfinished response) still get the id.
        request_id.set(rid)
        raw_id = rid.encode("ascii")

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(n, v) for n, v in message.get("headers", []) if n.lower() != REQUEST_ID]
                message = {**message, "headers": [*headers, (REQUEST_ID, raw_id)]}
            await send(message)

        await self.app(scope, receive, send_with_id)
