from __future__ import annotations

import logging

import orjson
from fastapi import APIRouter, Request, Response

from ..compaction import STRATEGIES_HEADER
from ..headers import upstream_request_headers
from ..limits import read_body
from ..services import services

router = APIRouter()
logger = logging.getLogger("compaction_proxy.chat")


@router.post("/v1/chat/completions")
async def chat_completions(request: Request) -> Response:
    svc = services(request)
    raw = await read_body(request, svc.settings.max_body_bytes)
    # trace: per-step timings for the metrics, at the cost of a token count per step (mostly cache hits).
    compacted = await svc.compactor.compact(raw, request.headers.get(STRATEGIES_HEADER), trace=True)
    svc.metrics.compacted(compacted)
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
        extra={
            "chain": compacted.chain.spec,
            "tokens_before": compacted.result.tokens_before,
            "tokens_after": compacted.result.tokens_after,
            "upstream_status": response.status_code,
            "fallback": compacted.fallback,
        },
    )
    return svc.upstream.relay(response, "POST chat/completions", compacted.response_headers())


@router.post("/compact")
async def compact(request: Request) -> Response:
    """Dry run: what /v1/chat/completions would send upstream, with per-step stats. Nothing is forwarded."""
    svc = services(request)
    raw = await read_body(request, svc.settings.max_body_bytes)
    compacted = await svc.compactor.compact(raw, request.headers.get(STRATEGIES_HEADER), trace=True)
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
