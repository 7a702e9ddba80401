"""Chat completions and their dry run: read the body, compact it, forward it (or answer what would go)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request, Response

from ..openapi import CHAT_OPENAPI, CHAT_RESPONSES, COMPACT_OPENAPI, COMPACT_RESPONSES
from ..wire import ChatCompletions
from .compacted import client_gone, dry_run, forward, read_and_compact

router = APIRouter()
logger = logging.getLogger("compaction_proxy.chat")


@router.post("/v1/chat/completions", openapi_extra=CHAT_OPENAPI, responses=CHAT_RESPONSES)
async def chat_completions(request: Request) -> Response:
    wire = ChatCompletions()
    compacted = await read_and_compact(request, tracked=True, wire=wire)
    if compacted is None:
        return client_gone()
    return await forward(request, compacted, "chat/completions", wire, logger)


@router.post("/compact", openapi_extra=COMPACT_OPENAPI, responses=COMPACT_RESPONSES)
async def compact(request: Request) -> Response:
    """Dry run: what /v1/chat/completions would send upstream, with per-step stats. Nothing is forwarded."""
    return await dry_run(
        request, ChatCompletions(), lambda compacted: {"messages": compacted.result.messages}, "a chat completion"
    )
