"""Anthropic's Messages API and its dry run, through the steps every compacted route shares (routes.compacted),
forwarded to Anthropic's upstream. The query (Claude Code's `?beta=true`) and the anthropic-* headers go as they came.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request, Response

from ..compaction import Compacted
from ..openapi import COMPACT_MESSAGES_OPENAPI, COMPACT_MESSAGES_RESPONSES, MESSAGES_OPENAPI, MESSAGES_RESPONSES
from ..services import services
from ..wire import AnthropicMessages, parse_object
from .compacted import compact_and_forward, dry_run

router = APIRouter()
logger = logging.getLogger("compaction_proxy.messages")


@router.post("/v1/messages", openapi_extra=MESSAGES_OPENAPI, responses=MESSAGES_RESPONSES)
async def messages(request: Request) -> Response:
    wire = AnthropicMessages.for_headers(request.headers)
    return await compact_and_forward(request, wire, "messages", logger, api="anthropic")


@router.post("/compact/messages", openapi_extra=COMPACT_MESSAGES_OPENAPI, responses=COMPACT_MESSAGES_RESPONSES)
async def compact_messages(request: Request) -> Response:
    """Dry run: the `system` and `messages` /v1/messages would send upstream, with per-step stats."""
    depth = services(request).settings.max_json_depth

    def sent(compacted: Compacted) -> dict[str, Any]:
        body, _ = parse_object(compacted.body, depth)  # what would go, as it would go
        return {"system": body.get("system"), "messages": body.get("messages", [])}

    return await dry_run(request, AnthropicMessages.for_headers(request.headers), sent)
