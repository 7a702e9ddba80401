"""The request body's limits: its size, refused up front when Content-Length says too much, else counted as it
arrives; and the time it may go without sending anything.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.edge.errors import ApiError


def too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        f"The request body is larger than this proxy accepts ({limit} bytes; setting max_body_bytes).",
        code="request_too_large",
    )


def _check_declared(request: Request, limit: int) -> None:
    declared = request.headers.get("content-length")
    # The server has already rejected a malformed Content-Length; a chunked body declares none.
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)


async def _counted(chunks: AsyncIterator[bytes], limit: int) -> AsyncIterator[bytes]:
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        yield chunk


def limited_stream(request: Request, limit: int) -> AsyncIterator[bytes]:
    """The body as it arrives. Raises a 413 ApiError now if Content-Length announces more than `limit`
    bytes (so nothing is sent upstream), or while iterating once more than that has arrived.
    """
    _check_declared(request, limit)
    return _counted(request.stream(), limit)


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refused with a 413 ApiError before more than `limit` bytes are held in memory."""
    return b"".join([chunk async for chunk in limited_stream(request, limit)])


class BodyTimeoutMiddleware:
    """A request body that sends nothing for `timeout` seconds is answered 408 and its connection closed, on every
    route that reads one (buffered or streamed upstream), instead of holding the request, and whatever it holds, for
    ever. Pure ASGI: the receive callable times out; the route sees the ApiError wherever it reads the body.
    """

    def __init__(self, app: ASGIApp, timeout: float) -> None:
        self.app = app
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        waiting = True  # for the body, before any answer: once either is complete, receive waits for a disconnect

        async def timed_receive() -> Message:
            nonlocal waiting
            if not waiting:
                return await receive()
            with anyio.move_on_after(self.timeout) as scope_:
                message = await receive()
            if scope_.cancelled_caught:
                raise ApiError(
                    408,
                    f"The request body sent nothing for {self.timeout:g} s (setting request_body_timeout_seconds).",
                    code="request_timeout",
                    headers={"connection": "close"},
                )
            waiting = message["type"] == "http.request" and message.get("more_body", False)
            return message

        async def answering_send(message: Message) -> None:
            nonlocal waiting
            if message["type"] == "http.response.start":
                waiting = False
            await send(message)

        await self.app(scope, timed_receive, answering_send)
