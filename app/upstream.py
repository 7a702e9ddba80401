"""The one pooled connection to the upstream API, and relaying its answers back unbuffered."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence

import anyio
import httpx
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse

from .errors import ApiError
from .headers import RawHeaders, client_response_headers
from .settings import Settings

logger = logging.getLogger("compaction_proxy.upstream")


class Upstream:
    """Sends requests to `{upstream_base_url}/{path}`. The base URL is fixed by configuration: no request
    can choose where it is forwarded, so the proxy is never an open relay.
    """

    def __init__(self, settings: Settings) -> None:
        self.base_url = settings.upstream_base_url
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(
                connect=settings.connect_timeout,
                read=settings.read_timeout,
                write=settings.write_timeout,
                pool=settings.pool_timeout,
            ),
            limits=httpx.Limits(
                max_connections=settings.max_connections,
                max_keepalive_connections=settings.max_keepalive_connections,
            ),
            follow_redirects=False,
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    async def open(
        self,
        method: str,
        path: str,
        *,
        query: str = "",
        headers: RawHeaders,
        content: bytes | AsyncIterator[bytes] | None,
    ) -> httpx.Response:
        """Send a request and return the response with its body not yet read."""
        url = f"{self.base_url}/{path}" + (f"?{query}" if query else "")
        request = self.client.build_request(method, url, headers=headers, content=content)
        try:
            return await self.client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            logger.warning("upstream timeout on %s %s: %s", method, path, type(exc).__name__)
            raise ApiError(
                504, "The upstream API did not answer in time.", type="upstream_error", code="upstream_timeout"
            ) from None
        except httpx.TransportError as exc:
            logger.warning("upstream unreachable on %s %s: %s", method, path, type(exc).__name__)
            raise ApiError(
                502, "The upstream API could not be reached.", type="upstream_error", code="upstream_unreachable"
            ) from None


async def _body(response: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.aiter_raw():
            yield chunk
    finally:
        # Also runs when the client goes away and the stream is cancelled: the upstream connection must
        # be released now, which a cancelled scope would otherwise skip.
        with anyio.CancelScope(shield=True):
            await response.aclose()


def relay(response: httpx.Response, extra_headers: Sequence[tuple[bytes, bytes]] = ()) -> StreamingResponse:
    """Status, headers and body bytes as the upstream sent them (still compressed, if they were)."""
    streaming = StreamingResponse(
        _body(response), status_code=response.status_code, background=BackgroundTask(response.aclose)
    )
    streaming.raw_headers = client_response_headers(response.headers.raw) + list(extra_headers)
    return streaming
