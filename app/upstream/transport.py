"""The upstream connection pool: httpx's API over aiohttp's HTTP/1.1 client.

Measured with `python -m bench.clients` (docs/benchmarks.md, "HTTP client"): httpx's own pool costs about 0.4 ms
of CPU per request at one connection and 0.7 ms at 16 (it polls every pooled socket on each request), httpx2
0.35 ms at both, aiohttp 0.05-0.1 ms. So the proxy keeps httpx's Request, Response and errors everywhere
(routes, app.forwarding, the expand rounds, the summariser) and sends through this transport: an
`httpx.AsyncBaseTransport` whose requests aiohttp carries. Bodies go and come as bytes, never decoded
(aiohttp's decompression is off): a relayed answer is what the upstream sent.

aiohttp's errors become httpx's, and httpx's four timeouts keep their meaning: `connect` for opening a
connection, `pool` (added to it) for waiting for a free one, `read` between chunks of the answer, and `write`
for each 64 KiB of a larger request body that the upstream does not take in.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator

import aiohttp
import httpx
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

Proxy = URL | None  # where to send a request through, credentials in its userinfo; None: direct
MAX_ORIGINS = 16
KEEPALIVE_SECONDS = 5.0  # an idle upstream connection is closed after this, as httpx's were
WRITE_CHUNK = 64 * 1024  # aiohttp waits for the socket to drain after this much; smaller bodies never wait
# aiohttp's headers for a request that has none of its own: the client's (or none) go instead.
_NO_AUTO_HEADERS = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")


class AiohttpTransport(httpx.AsyncBaseTransport):
    """One pool of upstream connections (limits.max_connections), opened in the event loop that first uses it:
    aiohttp binds its connections to one loop.
    """

    def __init__(self, *, limits: httpx.Limits) -> None:
        self.limit = limits.max_connections or 0
        # httpx's own certificate choice (certifi, or SSL_CERT_FILE / SSL_CERT_DIR), so trust is what it was.
        self.ssl: ssl.SSLContext = httpx.create_ssl_context(trust_env=True)
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[URL, Proxy] = {}  # by origin: the environment is read once for each
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session_here(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self.limit, limit_per_host=0, keepalive_timeout=KEEPALIVE_SECONDS, ssl=self.ssl
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,
                skip_auto_headers=_NO_AUTO_HEADERS,
                # Set-Cookie from the upstream is relayed to the client it answered, never kept for the next one.
                cookie_jar=aiohttp.DummyCookieJar(),
                # Not aiohttp's reading of the environment, which takes ~/.netrc too: the request's own key is what
                # goes. HTTP(S)_PROXY and NO_PROXY are read by _proxy_for, as httpx reads them.
                trust_env=False,
            )
            self._loop = loop
        return self._session

    def _proxy_for(self, url: URL) -> Proxy:
        origin = url.origin()
        if origin not in self._proxies:
            if len(self._proxies) >= MAX_ORIGINS:  # the base URLs are configured: a handful at most
                self._proxies.clear()
            self._proxies[origin] = _env_proxy(origin)
        return self._proxies[origin]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeout = request.extensions.get("timeout", {})
        connect, pool = timeout.get("connect"), timeout.get("pool")
        client_timeout = aiohttp.ClientTimeout(
            total=None,
            connect=None if connect is None or pool is None else connect + pool,
            sock_connect=connect,
            sock_read=timeout.get("read"),
        )
        url = URL(str(request.url), encoded=True)  # as httpx encoded it: yarl would decode %2F in a query
        proxy = self._proxy_for(url)
        upload = _Upload(timeout.get("write"))
        try:
            body = request.content  # a compacted body: bytes
        except httpx.RequestNotRead:
            body = None  # a passthrough upload, streamed as it comes
        try:
            async with asyncio.timeout(None) as upload.scope:
                try:
                    response = await self._session_here().request(
                        request.method,
                        url,
                        headers=_headers(request),
                        data=upload.body(body, request.stream),
                        timeout=client_timeout,
                        allow_redirects=False,
                        proxy=proxy,
                        compress=None,
                    )
                finally:
                    upload.scope = None  # the scope is left now: what aiohttp still writes is not timed
        except TimeoutError as exc:  # the write deadline (asyncio.timeout); aiohttp's own are subclasses, below
            if isinstance(exc, aiohttp.ConnectionTimeoutError):
                raise httpx.ConnectTimeout(str(exc) or "connect timeout", request=request) from exc
            if isinstance(exc, aiohttp.ServerTimeoutError):
                raise httpx.ReadTimeout(str(exc) or "read timeout", request=request) from exc
            raise httpx.WriteTimeout("the upstream took in no more of the request body", request=request) from exc
        except aiohttp.ClientConnectorError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        except aiohttp.ClientError as exc:
            if upload.failed is not None:
                raise upload.failed from None
            raise _mapped(exc, request) from exc
        extensions = {"http_version": b"HTTP/1.1", "reason_phrase": (response.reason or "").encode("latin-1")}
        return httpx.Response(
            response.status, headers=list(response.raw_headers), stream=_Body(response, request), extensions=extensions
        )

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()


class _Upload:
    """A request body as aiohttp sends it. `write` seconds for each chunk to be taken in, enforced on the task that
    waits for the answer's head; once that head has come (or the request failed) the last chunks are not timed.
    An error from a streamed upload (the client's body too large, or stalled) is kept in `failed`: aiohttp
    reports it as a connection error, and the caller raises it as it was.
    """

    def __init__(self, write: float | None) -> None:
        self.write = write
        self.scope: asyncio.Timeout | None = None
        self.failed: Exception | None = None

    def start(self) -> None:
        if self.scope is not None and self.write is not None:
            self.scope.reschedule(asyncio.get_running_loop().time() + self.write)

    def stop(self) -> None:
        if self.scope is not None:
            self.scope.reschedule(None)

    def body(self, body: bytes | None, stream: object) -> bytes | AsyncIterator[bytes] | None:
        """What aiohttp sends: a small body as it is (aiohttp never waits on writing it); a larger one, or an
        upload streamed through, in chunks: aiohttp asks for the next only once the last has drained.
        """
        if body is not None and (len(body) <= WRITE_CHUNK or self.write is None):
            return body or None

        async def chunks() -> AsyncIterator[bytes]:
            if body is not None:
                view = memoryview(body)
                for start in range(0, len(body), WRITE_CHUNK):
                    yield bytes(view[start : start + WRITE_CHUNK])
            else:
                try:
                    async for chunk in stream:  # type: ignore[attr-defined]
                        yield chunk
                except Exception as exc:
                    self.failed = exc
                    raise

        async def timed() -> AsyncIterator[bytes]:
            try:
                async for chunk in chunks():
                    self.start()
                    yield chunk
                    self.stop()
            finally:
                self.stop()

        return timed()


def _headers(request: httpx.Request) -> list[tuple[str, str]]:
    # A streamed upload's "Transfer-Encoding: chunked" is aiohttp's to set: given both, it refuses the request.
    return [(k, v) for k, v in request.headers.multi_items() if k.lower() != "transfer-encoding"]


def _env_proxy(url: URL) -> Proxy:
    """The proxy that HTTP(S)_PROXY and NO_PROXY name for `url`, as httpx would use it, with the credentials its
    URL gave; None: go direct.
    """
    try:
        proxy, auth = get_env_proxy_for_url(url)
    except LookupError:
        return None
    return proxy if auth is None else proxy.with_user(auth.login).with_password(auth.password)


def _mapped(exc: aiohttp.ClientError, request: httpx.Request) -> httpx.TransportError:
    if isinstance(exc, aiohttp.InvalidURL):
        return httpx.UnsupportedProtocol(str(exc), request=request)
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return httpx.RemoteProtocolError(str(exc) or type(exc).__name__, request=request)
    return httpx.ReadError(str(exc) or type(exc).__name__, request=request)


class _Body(httpx.AsyncByteStream):
    """An answer's bytes as aiohttp reads them off the socket; the connection goes back to the pool once the body
    has come whole, and is closed when it is let go before that.
    """

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self.response = response
        self.request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.response.content.iter_any():
                yield chunk
        except aiohttp.ServerTimeoutError as exc:
            raise httpx.ReadTimeout(str(exc) or "read timeout", request=self.request) from exc
        except TimeoutError as exc:
            raise httpx.ReadTimeout("read timeout", request=self.request) from exc
        except aiohttp.ClientError as exc:
            raise _mapped(exc, self.request) from exc

    async def aclose(self) -> None:
        if self.response.content.at_eof():
            self.response.release()
        else:
            self.response.close()
