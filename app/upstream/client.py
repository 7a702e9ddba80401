"""The one pool of connections to the upstream APIs (app.upstream.transport), and what is sent through it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx

from app.edge.errors import ApiError
from app.edge.headers import RawHeaders
from app.edge.metrics import Metrics
from app.policy.keys import Keys
from app.settings import Api, Settings
from app.upstream.relay import OnComplete, Relay
from app.upstream.transport import AiohttpTransport
from app.wire import WireFormat

logger = logging.getLogger("compaction_proxy.upstream")
REFUSE_ALL = DefaultCookiePolicy(allowed_domains=[])


def printable_url(url: str) -> str:
    """The URL without credentials or query (where some put keys): what a log line may show."""
    parsed = httpx.URL(url)
    return str(parsed.copy_with(userinfo=b"", query=None, fragment=None))


def base_urls(settings: Settings) -> dict[Api, str]:
    """Where each API's requests go: a format's upstream_path is joined to its API's base URL with a `/`."""
    return {"openai": settings.upstream_base_url, "anthropic": f"{settings.anthropic_base_url}/v1"}


class Upstream:
    """Sends requests to `{upstream_base_url}/{path}`, or Anthropic's `{anthropic_base_url}/v1/{path}`. The base
    URLs are fixed by configuration: no request can choose where it is forwarded, so the proxy is never an open relay.
    """

    def __init__(self, settings: Settings, keys: Keys, metrics: Metrics) -> None:
        self.base_urls = base_urls(settings)
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

        The credentials sent are the ones the key mode calls for (see app.policy.keys.Keys), whatever the route
        passed.
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
        *,
        wire: WireFormat,
        on_complete: OnComplete | None = None,
    ) -> Relay:
        """Status, headers and body bytes as the upstream sent them (still compressed, if they were).
        `what` names the request in log lines ("POST chat/completions"): never a query string. `wire`: the
        format whose error event ends a broken stream. on_complete: called after
        the response, with the end of an uncompressed body that came whole.
        """
        return Relay(response, what, self.metrics, extra_headers, wire, on_complete)
