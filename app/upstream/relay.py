"""An upstream answer relayed to the client as it comes, unbuffered: status, headers and body bytes; a stream the
upstream breaks off ends in the wire format's error event, never in something that looks whole.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import anyio
import httpx
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from app.edge.headers import client_response_headers
from app.edge.metrics import Metrics
from app.upstream.models.usage import HEAD_BYTES, TAIL_BYTES
from app.upstream.sse import EVENT_ENDS
from app.wire import WireFormat

logger = logging.getLogger("compaction_proxy.upstream")
WHOLE_BYTES = 1024 * 1024  # an answer of at most this Content-Length is relayed without watching for a disconnect
DECODED_BYTES = 64 * 1024 * 1024  # what a compressed answer's copy is decoded to at most, for its usage
# What the error event says of a stream still running when the shutdown grace ended.
CUT_AT_SHUTDOWN = ("The proxy shut down before the response was complete.", "proxy_shutdown")
# Called once a relayed body has gone out whole, with its ends (UsageEnds): where usage is reported.
OnComplete = Callable[[bytes], Awaitable[None]]


class Relay(StreamingResponse):
    """Streams an upstream response to the client. If the upstream breaks off mid-body, the client must
    not be handed something that looks complete: an SSE stream gets the wire format's error event (and, for
    chat, no [DONE]); any other body is left unfinished, so the server drops the connection mid-message.
    """

    def __init__(
        self,
        response: httpx.Response,
        what: str,
        metrics: Metrics,
        extra_headers: Sequence[tuple[bytes, bytes]],
        wire: WireFormat,
        on_complete: OnComplete | None = None,
    ) -> None:
        self.upstream = response
        self.what = what
        self.metrics = metrics
        self.wire = wire
        self.complete = True
        self.ends = UsageEnds.of(response.headers.get("content-encoding", "identity")) if on_complete else None
        self.on_complete = on_complete if self.ends is not None else None
        self.tail: bytes | None = None  # the body's ends, once it has come whole
        self.sent = 0  # bytes relayed so far
        self.last_bytes = b""  # the last four of them: whether the body stands between two events
        super().__init__(self._body(), status_code=response.status_code, background=BackgroundTask(self._after))
        self.raw_headers = client_response_headers(response.headers.raw) + list(extra_headers)

    async def _body(self) -> AsyncIterator[bytes]:
        response = self.upstream
        ends = self.ends
        try:
            async for chunk in response.aiter_raw():
                self.sent += len(chunk)
                self.last_bytes = (self.last_bytes + chunk)[-4:]
                if ends is not None:
                    ends.feed(chunk)
                yield chunk
            self.tail = ends.ends() if ends is not None else None
        except httpx.TransportError as exc:
            timeout = isinstance(exc, httpx.TimeoutException)
            self.metrics.upstream_error("timeout" if timeout else "broken_stream")
            # One line, no traceback: this is the network failing, not the proxy.
            logger.warning(
                "upstream %s on %s after %d bytes: %s; the client's response is cut short",
                "stopped sending (stream idle timeout)" if timeout else "broke off the response",
                self.what,
                self.sent,
                type(exc).__name__,
            )
            if self._can_append_event():
                yield self.wire.stream_error_event(*broken_stream(timeout))
            else:
                self.complete = False
        finally:
            # Also runs when the client goes away and the stream is cancelled: the upstream connection must
            # be released now, which a cancelled scope would otherwise skip.
            with anyio.CancelScope(shield=True):
                await response.aclose()

    async def _after(self) -> None:
        await self.upstream.aclose()
        if self.on_complete is not None and self.tail is not None:
            await self.on_complete(self.tail)

    def _can_append_event(self) -> bool:
        """Whether an error event can end the body: an uncompressed event stream, cut between two events."""
        headers = self.upstream.headers
        return (
            headers.get("content-type", "").startswith("text/event-stream")
            and headers.get("content-encoding", "identity") == "identity"
            and (self.sent == 0 or self.last_bytes.endswith(EVENT_ENDS))
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._arrives_whole():
            # Starlette watches for the client's disconnect in a task of its own while it streams; for a short
            # answer of known length (a whole chat completion) that costs more than it could ever save.
            await self.stream_response(send)
            if self.background is not None:
                await self.background()
            return
        await super().__call__(scope, receive, send)

    def _arrives_whole(self) -> bool:
        headers = self.upstream.headers
        length = headers.get("content-length", "")
        return (
            not headers.get("content-type", "").startswith("text/event-stream")
            and length.isdigit()
            and int(length) <= WHOLE_BYTES
        )

    async def stream_response(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        try:
            async for chunk in self.body_iterator:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except anyio.get_cancelled_exc_class():
            # The server's shutdown grace ended (or the client left, and nothing is read): a stream cut between two
            # events ends in the wire's error event, so the client's SDK raises instead of taking it for whole.
            if self._can_append_event():
                with anyio.CancelScope(shield=True):
                    event = self.wire.stream_error_event(*CUT_AT_SHUTDOWN)
                    await send({"type": "http.response.body", "body": event, "more_body": True})
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
            raise
        if self.complete:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        # Otherwise return without the final message: the server then closes the connection and the
        # client sees a truncated body instead of a short one that looks whole.


class UsageEnds:
    """What on_complete reads usage from: the body whole, or its first HEAD_BYTES and last TAIL_BYTES apart (the
    Messages API's stream reports its input in its first event). A compressed body (most whole answers: the SDKs ask
    for gzip) is relayed as it came, and a copy of it decoded here for its ends.
    """

    def __init__(self, decoder: Any | None) -> None:
        self.decoder = decoder  # a zlib decompressobj; None: the body is not encoded
        self.head, self.end, self.cut = b"", b"", False
        self.decoded = 0
        self.failed = False

    @classmethod
    def of(cls, encoding: str) -> UsageEnds | None:
        """For a body in this Content-Encoding; None for one it cannot decode (br, zstd, several)."""
        encoding = encoding.strip().lower()
        if encoding == "identity":
            return cls(None)
        if encoding in ("gzip", "x-gzip", "deflate"):
            # 32 + MAX_WBITS reads a gzip or a zlib header; "deflate" is zlib-wrapped as RFC 9110 says.
            return cls(zlib.decompressobj(32 + zlib.MAX_WBITS))
        return None

    def feed(self, chunk: bytes) -> None:
        if self.failed:
            return
        if self.decoder is not None:
            try:
                # Bounded: a body that decodes to far more than it weighs is not one to read usage from.
                chunk = self.decoder.decompress(chunk, DECODED_BYTES - self.decoded + 1)
            except zlib.error:
                self.failed = True
                return
            self.decoded += len(chunk)
            if self.decoded > DECODED_BYTES or self.decoder.unconsumed_tail:
                self.failed = True
                return
        if len(self.head) < HEAD_BYTES:
            room = HEAD_BYTES - len(self.head)
            self.head, chunk = self.head + chunk[:room], chunk[room:]
        self.cut = self.cut or len(self.end) + len(chunk) > TAIL_BYTES
        self.end = (self.end + chunk)[-TAIL_BYTES:]

    def ends(self) -> bytes | None:
        """The body's ends; None where a compressed one could not be decoded."""
        if self.failed:
            return None
        return self.head + b"\n\n" + self.end if self.cut else self.head + self.end


def broken_stream(timeout: bool) -> tuple[str, str]:
    """The message and code a broken stream's error event carries."""
    if timeout:
        return "The upstream API stopped sending before the response was complete.", "upstream_timeout"
    return "The upstream API broke off the response before it was complete.", "upstream_broken_stream"
