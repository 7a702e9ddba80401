"""Chat completions and their dry run: read the body, compact it, forward it (or answer what would go)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request, Response

from ..compaction import Compacted
from ..errors import ApiError
from ..expansion import added_tools
from ..headers import upstream_request_headers
from ..limits import read_body
from ..openapi import CHAT_OPENAPI, CHAT_RESPONSES, COMPACT_OPENAPI, COMPACT_RESPONSES
from ..services import services
from ..wire import dump_json

router = APIRouter()
logger = logging.getLogger("compaction_proxy.chat")


async def read_and_compact(request: Request, *, tracked: bool) -> Compacted | None:
    """The request's body, read and compacted; None when the client went away meanwhile."""
    svc = services(request)
    raw = await read_body(request, svc.settings.max_body_bytes)
    return await svc.compactor.compact_request(request, raw, tracked=tracked)


def client_gone() -> Response:
    # What nginx logs for a client that closed the connection before the answer: nobody reads this one.
    return Response(status_code=499)


@router.post("/v1/chat/completions", openapi_extra=CHAT_OPENAPI, responses=CHAT_RESPONSES)
async def chat_completions(request: Request) -> Response:
    svc = services(request)
    compacted = await read_and_compact(request, tracked=True)
    if compacted is None:
        return client_gone()
    svc.metrics.compacted(compacted)
    headers = upstream_request_headers(request.headers.raw)
    if compacted.expansion is not None:
        log_compacted(compacted, None)
        return await svc.expander.forward(
            request, compacted.expansion, compacted.body, "chat/completions", headers, compacted.response_headers()
        )
    response = await svc.upstream.open(
        "POST", "chat/completions", query=request.url.query, headers=headers, content=compacted.body
    )
    log_compacted(compacted, response.status_code)
    return svc.upstream.relay(response, "POST chat/completions", compacted.response_headers())


def log_compacted(compacted: Compacted, upstream_status: int | None) -> None:
    result = compacted.result
    logger.info(
        "chat.completions chain=%s tokens=%d->%d upstream_status=%s",
        compacted.chain.spec,
        result.tokens_before,
        result.tokens_after,
        "expand" if upstream_status is None else upstream_status,
        extra={
            "chain": compacted.chain.spec,
            "tokens_before": result.tokens_before,
            "tokens_after": result.tokens_after,
            "upstream_status": upstream_status,
            "fallback": compacted.fallback,
            "prefix": compacted.prefix,
            "expand_offered": compacted.expansion is not None,
        },
    )


@router.post("/compact", openapi_extra=COMPACT_OPENAPI, responses=COMPACT_RESPONSES)
async def compact(request: Request) -> Response:
    """Dry run: what /v1/chat/completions would send upstream, with per-step stats. Nothing is forwarded."""
    compacted = await read_and_compact(request, tracked=False)
    if compacted is None:
        return client_gone()
    if not compacted.counted:
        raise ApiError(
            503,
            f"Compaction did not finish within compaction_deadline_seconds "
            f"({services(request).settings.compaction_deadline_seconds:g} s); a chat completion would be forwarded "
            "uncompacted.",
            type="server_error",
            code="compaction_deadline",
        )
    result = compacted.result
    body = {
        "messages": result.messages,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "added_tools": added_tools(compacted.expansion) if compacted.expansion else [],
        "steps": [
            {"strategy": s.strategy, "tokens_before": s.tokens_before, "tokens_after": s.tokens_after, "ms": s.ms}
            | s.details
            for s in result.steps
        ],
    }
    response = Response(dump_json(body), media_type="application/json")
    response.raw_headers.extend(compacted.response_headers())
    return response
