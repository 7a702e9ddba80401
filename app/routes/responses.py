"""OpenAI's Responses API: POST /v1/responses compacted like chat completions (routes.compacted), its dry run, and
the WebSocket mode refused or relayed (settings.responses_websocket). The other /v1/responses/* paths (compact, a stored
response, its input items, input token counts, cancel, delete) are the passthrough's.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request, Response, WebSocket

from ..compaction import Compacted
from ..openapi import COMPACT_RESPONSES_OPENAPI, COMPACT_RESPONSES_RESPONSES, RESPONSES_OPENAPI, RESPONSES_RESPONSES
from ..services import services
from ..websocket_relay import refuse, relay
from ..wire import Responses, parse_object
from .compacted import compact_and_forward, dry_run

router = APIRouter()
logger = logging.getLogger("compaction_proxy.responses")


@router.post("/v1/responses", openapi_extra=RESPONSES_OPENAPI, responses=RESPONSES_RESPONSES)
async def responses(request: Request) -> Response:
    return await compact_and_forward(request, Responses(), "responses", logger)


@router.post("/compact/responses", openapi_extra=COMPACT_RESPONSES_OPENAPI, responses=COMPACT_RESPONSES_RESPONSES)
async def compact_responses(request: Request) -> Response:
    """Dry run: the `input` and `instructions` /v1/responses would send upstream, with per-step stats."""
    depth = services(request).settings.max_json_depth

    def sent(compacted: Compacted) -> dict[str, Any]:
        body, _ = parse_object(compacted.body, depth)  # what would go, as it would go
        return {"input": body.get("input"), "instructions": body.get("instructions")}

    return await dry_run(request, Responses(), sent)


@router.websocket("/v1/responses")
async def responses_websocket(websocket: WebSocket) -> None:
    """The key was checked (authenticate) before the handshake is answered."""
    svc = services(websocket)
    if svc.settings.responses_websocket == "refuse":
        await refuse(websocket)
    else:
        await relay(websocket, svc, "responses")
