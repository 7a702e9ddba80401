from __future__ import annotations

import logging

import orjson
from fastapi import APIRouter, Request, Response

from ..compaction import STRATEGIES_HEADER
from ..headers import upstream_request_headers
from ..services import services
from ..upstream import relay

router = APIRouter()
logger = logging.getLogger("compaction_proxy.chat")


@router.post("/v1/chat/completions")
async def chat_completions(request: Request) -> Response:
    svc = services(request)
    compacted = await svc.compactor.compact(await request.body(), request.headers.get(STRATEGIES_HEADER))
    response = await svc.upstream.open(
        "POST",
        "chat/completions",
        query=request.url.query,
        headers=upstream_request_headers(request.headers.raw),
        content=compacted.body,
    )
    logger.info(
        "chat.completions chain=%s tokens=%d->%d upstream_status=%d",
        compacted.chain.spec,
        compacted.result.tokens_before,
        compacted.result.tokens_after,
        response.status_code,
    )
    return relay(response, compacted.response_headers())


@router.post("/compact")
async def compact(request: Request) -> Response:
    """Dry run: what /v1/chat/completions would send upstream, with per-step stats. Nothing is forwarded."""
    compacted = await services(request).compactor.compact(
        await request.body(), request.headers.get(STRATEGIES_HEADER), trace=True
    )
    result = compacted.result
    body = {
        "messages": result.messages,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "steps": [
            {
                "strategy": s.strategy,
                "tokens_before": s.tokens_before,
                "tokens_after": s.tokens_after,
                "ms": s.ms,
                **s.details,
            }
            for s in result.steps
        ],
    }
    response = Response(orjson.dumps(body), media_type="application/json")
    response.raw_headers.extend(compacted.response_headers())
    return response
