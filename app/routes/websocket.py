"""The Responses API's WebSocket mode (Codex CLI tries it first), on the Responses route's own path: refused, so the
client falls back to HTTP and is compacted, or relayed uncompacted (settings.responses_websocket).
"""

from __future__ import annotations

from fastapi import APIRouter, WebSocket

from app.services import services
from app.upstream.websocket import refuse, relay
from app.wire import Responses

router = APIRouter()


@router.websocket(Responses.path)
async def responses_websocket(websocket: WebSocket) -> None:
    """The key was checked (authenticate) before the handshake is answered."""
    svc = services(websocket)
    if svc.settings.responses_websocket == "refuse":
        await refuse(websocket)
    else:
        await relay(websocket, svc, Responses.upstream_path)
