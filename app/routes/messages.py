"""Anthropic's Messages API and its dry run: read the body, compact it, forward it to Anthropic's upstream (or
answer what would go). The query (Claude Code's `?beta=true`) and the anthropic-* headers go as they came.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request, Response

from ..compaction import Compacted
from ..openapi import COMPACT_MESSAGES_OPENAPI, COMPACT_MESSAGES_RESPONSES, MESSAGES_OPENAPI, MESSAGES_RESPONSES
from ..wire import AnthropicMessages, parse_object
from .compacted import client_gone, dry_run, forward, read_and_compact

router = APIRouter()
logger = logging.getLogger("compaction_proxy.messages")


@router.post("/v1/messages", openapi_extra=MESSAGES_OPENAPI, responses=MESSAGES_RESPONSES)
async def messages(request: Request) -> Response:
    wire = AnthropicMessages.for_headers(request.headers)
    compacted = await read_and_compact(request, tracked=True, wire=wire)
    if compacted is None:
        return client_gone()
    return await forward(request, compacted, "messages", wire, logger, api="anthropic")


@router.post("/compact/messages", openapi_extra=COMPACT_MESSAGES_OPENAPI, responses=COMPACT_MESSAGES_RESPONSES)
async def compact_messages(request: Request) -> Response:
    """Dry run: the `system` and `messages` /v1/messages would send upstream, with per-step stats."""
    return await dry_run(request, AnthropicMessages.for_headers(request.headers), _conversation, "a message request")


def _conversation(compacted: Compacted) -> dict[str, Any]:
    body, _ = parse_object(compacted.body)
    return {"system": body.get("system"), "messages": body.get("messages", [])}
