"""A client's WebSocket to the upstream API: refused, so that the client falls back to HTTP (which is compacted), or
relayed both ways as it is. The upstream is the configured one and the key the one app.policy.keys.Keys sends: a
socket is no way around either.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress

import anyio
import websockets
from starlette.responses import Response
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets.asyncio.client import ClientConnection, connect

from app.edge.error_handlers import error_response
from app.edge.headers import upstream_request_headers
from app.services import Services

logger = logging.getLogger("compaction_proxy.websocket")
# The handshake's own headers: the upstream connection makes its own.
_HANDSHAKE = frozenset(
    {b"sec-websocket-key", b"sec-websocket-version", b"sec-websocket-extensions", b"sec-websocket-protocol"}
)
_NOT_TO_UPSTREAM = _HANDSHAKE | {b"accept-encoding", b"user-agent"}


async def refuse(websocket: WebSocket) -> None:
    """426: a client such as Codex then sends every request of the session as an HTTP POST."""
    await websocket.send_denial_response(
        error_response(
            websocket.url.path,
            426,
            "This proxy compacts /v1/responses over HTTP and does not accept a WebSocket here; send the request as "
            "an HTTP POST (setting responses_websocket).",
            type="invalid_request_error",
            code="websocket_not_accepted",
        )
    )


class _NoRedirects(connect):
    """A client connection that follows no redirect: the HTTP paths follow none either, and a redirect would send
    the client's credentials, or the proxy's key, to wherever the upstream's answer points. The 3xx is the answer.
    """

    def process_redirect(self, exc: Exception) -> Exception | str:
        return exc


def _upstream_url(base_url: str, path: str) -> str:
    scheme, rest = base_url.split("://", 1)
    return f"{'wss' if scheme == 'https' else 'ws'}://{rest}/{path}"


async def relay(websocket: WebSocket, svc: Services, path: str) -> None:
    """Opens the upstream's socket first, so that its refusal (status, body) reaches the client as the answer to the
    client's own handshake; then passes every message both ways until either side closes.
    """
    settings = svc.settings
    raw = [(n, v) for n, v in upstream_request_headers(websocket.headers.raw) if n.lower() not in _NOT_TO_UPSTREAM]
    user_agent = websocket.headers.get("user-agent")
    headers = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in svc.keys.outgoing(raw)]
    protocols = [p.strip() for p in websocket.headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    try:
        upstream = await _NoRedirects(
            _upstream_url(settings.upstream_base_url, path),
            additional_headers=headers,
            user_agent_header=user_agent,
            subprotocols=protocols or None,  # type: ignore[arg-type]
            max_size=settings.max_body_bytes,
            open_timeout=settings.connect_timeout,
            proxy=None,
        )
    except websockets.InvalidStatus as exc:
        answer = exc.response
        logger.info("upstream refused the WebSocket on %s: %d", path, answer.status_code)
        kept = {k: v for k, v in answer.headers.raw_items() if k.lower() in ("content-type", "retry-after")}
        await websocket.send_denial_response(Response(bytes(answer.body or b""), answer.status_code, headers=kept))
        return
    except (OSError, TimeoutError, websockets.InvalidHandshake) as exc:
        svc.metrics.upstream_error("unreachable")
        logger.warning("upstream WebSocket on %s could not be opened: %s", path, type(exc).__name__)
        await websocket.send_denial_response(
            error_response(
                websocket.url.path,
                502,
                "The upstream API could not be reached.",
                type="upstream_error",
                code="upstream_unreachable",
            )
        )
        return
    async with upstream:
        await websocket.accept(upstream.subprotocol)
        await _pump(websocket, upstream)


async def _pump(websocket: WebSocket, upstream: ClientConnection) -> None:
    """Messages both ways until either side closes; then the other is closed too, with the upstream's close code."""

    async def from_client() -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            await upstream.send(text if text is not None else message.get("bytes") or b"")

    async def from_upstream() -> None:
        async for message in upstream:
            await (websocket.send_text(message) if isinstance(message, str) else websocket.send_bytes(message))

    async with anyio.create_task_group() as tasks:

        async def until_closed(side: Callable[[], Awaitable[None]]) -> None:
            with suppress(websockets.ConnectionClosed, WebSocketDisconnect):
                await side()
            tasks.cancel_scope.cancel()

        tasks.start_soon(until_closed, from_client)
        tasks.start_soon(until_closed, from_upstream)
    await upstream.close()
    code = upstream.close_code
    # 1005 (no code given) and 1006 (no close frame) may not be sent; the latter means the upstream broke off.
    with suppress(WebSocketDisconnect, RuntimeError):  # the client may be gone already
        await websocket.close(1011 if code == 1006 else 1000 if code in (None, 1005) else code)
