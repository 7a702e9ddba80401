"""Reading an upstream's refusal without losing it: an error answer read whole (if short) so that its stated window
can be learned, and a stream peeked at to tell one that ended before its first byte; either way the client can
still be given the answer exactly as it came.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from app.upstream.models import MAX_ERROR_BYTES


class _Replay(httpx.AsyncByteStream):
    """A body partly read already: what was read, then the rest as it comes."""

    def __init__(self, head: bytes, rest: AsyncIterator[bytes] | None, source: httpx.Response) -> None:
        self.head, self.rest, self.source = head, rest, source

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.head:
            yield self.head
        if self.rest is not None:
            async for chunk in self.rest:
                yield chunk

    async def aclose(self) -> None:
        await self.source.aclose()


def may_be_overflow(response: httpx.Response) -> bool:
    """Whether the answer may be a context-length refusal: a 400 or 413 short enough to read."""
    length = response.headers.get("content-length")
    return response.status_code in (400, 413) and (
        length is None or (length.isdigit() and int(length) <= MAX_ERROR_BYTES)
    )


async def read_error(response: httpx.Response) -> tuple[httpx.Response, bytes | None]:
    """The response to relay in its place (its body unchanged) and its decoded body, if short enough to read."""
    head = b""
    chunks = response.aiter_raw()
    async for chunk in chunks:
        head += chunk
        if len(head) > MAX_ERROR_BYTES:
            return httpx.Response(
                response.status_code, headers=response.headers.raw, stream=_Replay(head, chunks, response)
            ), None
    await response.aclose()
    replay = httpx.Response(response.status_code, headers=response.headers.raw, stream=_Replay(head, None, response))
    try:
        decoded = httpx.Response(response.status_code, headers=response.headers.raw, content=head).read()
    except httpx.DecodingError:
        return replay, None
    return replay, decoded


def is_event_stream(response: httpx.Response) -> bool:
    return response.status_code == 200 and response.headers.get("content-type", "").startswith("text/event-stream")


async def peek(response: httpx.Response) -> tuple[httpx.Response, bool]:
    """The response to relay in its place (its first chunk read), and whether it ended or broke off before its first
    byte.
    """
    chunks = response.aiter_raw()
    first = b""
    try:
        while not first:  # an empty chunk says nothing yet
            first = await chunks.__anext__()
    except (StopAsyncIteration, httpx.TransportError):
        # Ended or broken off before its first byte: an empty event stream is no answer either.
        await response.aclose()
        return _broken(response), True
    replay = _Replay(first, chunks, response)
    return httpx.Response(response.status_code, headers=response.headers.raw, stream=replay), False


class _Broken(httpx.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        raise httpx.RemoteProtocolError("the upstream closed the stream before its first byte")
        yield b""  # an async generator  # pragma: no cover


def _broken(response: httpx.Response) -> httpx.Response:
    """A stand-in for a stream that broke before its first byte: relayed, it ends in the wire's error event."""
    return httpx.Response(response.status_code, headers=response.headers.raw, stream=_Broken())
