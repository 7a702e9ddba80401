"""Chat completions and their dry run, through the steps every compacted route shares (routes.compacted)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request, Response

from ..openapi import CHAT_OPENAPI, CHAT_RESPONSES, COMPACT_OPENAPI, COMPACT_RESPONSES
from ..wire import ChatCompletions
from .compacted import compact_and_forward, dry_run

router = APIRouter()
logger = logging.getLogger("compaction_proxy.chat")


@router.post("/v1/chat/completions", openapi_extra=CHAT_OPENAPI, responses=CHAT_RESPONSES)
async def chat_completions(request: Request) -> Response:
    return await compact_and_forward(request, ChatCompletions(), "chat/completions", logger)


@router.post("/compact", openapi_extra=COMPACT_OPENAPI, responses=COMPACT_RESPONSES)
async def compact(request: Request) -> Response:
    """Dry run: what /v1/chat/completions would send upstream, with per-step stats. Nothing is forwarded."""
    return await dry_run(request, ChatCompletions(), lambda compacted: {"messages": compacted.result.messages})
