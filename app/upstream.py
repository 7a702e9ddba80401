"""The one pool of connections to the upstream API (app.transport), and relaying its answers back unbuffered."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from http.cookiejar import CookieJar, DefaultCookiePolicy

import anyio
import httpx
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from .auth import Api, Keys
from .errors import ApiError
from .headers import RawHeaders, client_response_headers
from .metrics import Metrics
from .model_limits.usage import TAIL_BYTES
from .settings import Settings
from .transport import AiohttpTransport
from .wire import ChatCompletions, WireFormat

logger = logging.getLogger("compaction_proxy.upstream")
EVENT_ENDS = (b"\n\n", b"\r\n\r\n", b"\r\r")  # what ends an SSE event, by line ending
REFUSE_ALL = DefaultCookiePolicy(allowed_domains=[])
WHOLE_BYTES = 1024 * 1024  # an answer of at most this Content-Length is relayed without watching for a disconnect
# Called once a relayed body has gone out whole, with its last TAIL_BYTES (where usage is reported).
OnComplete = Callable[[bytes], Awaitable[None]]


def printable_url(url: str) -> str:
    """The URL without credentials or query (where some put keys): what a log line may show."""
    parsed = httpx.URL(url)
    return str(parsed.copy_with(userinfo=b"", query=None, fragment=None))


class Upstream:
    """Sends requests to `{upstream_base_url}/{path}`, or Anthropic's `{anthropic_base_url}/v1/{path}`. The base
    URLs are fixed by configuration: no request can choose where it is forwarded, so the proxy is never an open relay.
    """

    def __init__(self, settings: Settings, keys: Keys, metrics: Metrics) -> None:
        self.base_urls: dict[Api, str] = {
            "openai": settings.upstream_base_url,
            "anthropic": f"{settings.anthropic_base_url}/v1",
        }
        self.keys = keys
        self.metrics = metrics
        timeout = httpx.Timeout(
            connect=settings.connect_timeout,
            read=settings.read_timeout,
            write=settings.write_timeout,
            pool=settings.pool_timeout,
        )
        self.timeout = timeout.as_dict()
        self.transport = AiohttpTransport(limits=httpx.Limits(max_connections=settings.max_connections))
        # For the proxy's own calls (the summariser, the models' metadata), on the same pool. Its cookie jar
        # keeps nothing: one client's Set-Cookie is never sent with another's request.
        self.client = httpx.AsyncClient(
            transport=self.transport, timeout=timeout, follow_redirects=False, cookies=CookieJar(REFUSE_ALL)
        )

    async def aclose(self) -> None:
        await self.client.aclose()  # closes the transport too

    async def open(
        self,
        method: str,
        path: str,
        *,
        query: str = "",
        headers: RawHeaders,
        content: bytes | AsyncIterator[bytes] | None,
        api: Api = "openai",
    ) -> httpx.Response:
        """Send a request to that upstream and return the response with its body not yet read.

        The credentials sent are the ones the key mode calls for (see auth.Keys), whatever the route passed.
        """
        url = f"{self.base_urls[api]}/{path}" + (f"?{query}" if query else "")
        # Straight to the transport: an httpx.AsyncClient's redirects, auth, cookies and default headers add a
        # third to the transport's own cost per request (bench.clients), and a proxy wants none of them.
        outgoing = self.keys.outgoing(headers, api)
        request = httpx.Request(method, url, headers=outgoing, content=content, extensions={"timeout": self.timeout})
        try:
            response = await self.transport.handle_async_request(request)
        except httpx.TimeoutException as exc:
            self.metrics.upstream_error("timeout")
            logger.warning("upstream timeout on %s %s: %s", method, path, type(exc).__name__)
            raise ApiError(
                504, "The upstream API did not answer in time.", type="upstream_error", code="upstream_timeout"
            ) from None
        except httpx.TransportError as exc:
            self.metrics.upstream_error("unreachable")
            logger.warning("upstream unreachable on %s %s: %s", method, path, type(exc).__name__)
            raise ApiError(
                502, "The upstream API could not be reached.", type="upstream_error", code="upstream_unreachable"
            ) from None
        base = self.base_urls[api]
        if response.status_code == 404 and api == "openai" and not httpx.URL(base).path.rstrip("/").endswith("/v1"):
            logger.warning(
                "the upstream answered 404 on %s %s; its base URL %s does not end in /v1: most OpenAI-compatible "
                "servers want %s/v1",
                method,
                path,
                printable_url(base),
                printable_url(base),
            )
        return response

    def relay(
        self,
        response: httpx.Response,
        what: str,
        extra_headers: Sequence[tuple[bytes, bytes]] = (),
        wire: WireFormat | None = None,
        on_complete: OnComplete | None = None,
    ) -> StreamingResponse:
        """Status, headers and body bytes as the upstream sent them (still compressed, if they were).
        `what` names the request in log lines ("POST chat/completions"): never a query string. `wire`: the
        format whose error event ends a broken stream (default: chat completions'). on_complete: called after
        the response, with the end of an uncompressed body that came whole.
        """
        return Relay(response, what, self.metrics, extra_headers, wire or ChatCompletions(), on_complete)


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
        identity = response.headers.get("content-encoding", "identity") == "identity"
        self.on_complete = on_complete if identity else None
        self.tail: bytes | None = None  # the body's end, once it has come whole
        super().__init__(self._body(), status_code=response.status_code, background=BackgroundTask(self._after))
        self.raw_headers = client_response_headers(response.headers.raw) + list(extra_headers)

    async def _body(self) -> AsyncIterator[bytes]:
        response = self.upstream
        sent = 0
        tail = b""
        end = b""
        try:
            async for chunk in response.aiter_raw():
                sent += len(chunk)
                tail = (tail + chunk)[-4:]
                if self.on_complete is not None:
                    end = (end + chunk)[-TAIL_BYTES:]
                yield chunk
            self.tail = end
        except httpx.TransportError as exc:
            timeout = isinstance(exc, httpx.TimeoutException)
            self.metrics.upstream_error("timeout" if timeout else "broken_stream")
            # One line, no traceback: this is the network failing, not the proxy.
            logger.warning(
                "upstream %s on %s after %d bytes: %s; the client's response is cut short",
                "stopped sending (stream idle timeout)" if timeout else "broke off the response",
                self.what,
                sent,
                type(exc).__name__,
            )
            if self._can_append_event(sent, tail):
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

    def _can_append_event(self, sent: int, tail: bytes) -> bool:
        headers = self.upstream.headers
        return (
            headers.get("content-type", "").startswith("text/event-stream")
            and headers.get("content-encoding", "identity") == "identity"
            and (sent == 0 or tail.endswith(EVENT_ENDS))
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
        async for chunk in self.body_iterator:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if self.complete:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        # Otherwise return without the final message: the server then closes the connection and the
        # client sees a truncated body instead of a short one that looks whole.


def broken_stream(timeout: bool) -> tuple[str, str]:
    """The message and code a broken stream's error event carries."""
    if timeout:
        return "The upstream API stopped sending before the response was complete.", "upstream_timeout"
    return "The upstream API broke off the response before it was complete.", "upstream_broken_stream"
