"""Chat completions and their dry run: read the body, compact it, forward it (or answer what would go).

The same steps serve every wire format (routes.responses): each route names its format and upstream path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response

from ..compaction import Compacted
from ..errors import ApiError
from ..expansion import added_tools
from ..headers import upstream_request_headers
from ..limits import read_body
from ..openapi import CHAT_OPENAPI, CHAT_RESPONSES, COMPACT_OPENAPI, COMPACT_RESPONSES
from ..services import services
from ..wire import ChatCompletions, WireFormat, dump_json

router = APIRouter()
logger = logging.getLogger("compaction_proxy.chat")


async def read_and_compact(request: Request, *, tracked: bool, wire: WireFormat) -> Compacted | None:
    """The request's body, read and compacted; None when the client went away meanwhile."""
    svc = services(request)
    raw = await read_body(request, svc.settings.max_body_bytes)
    return await svc.compactor.compact_request(request, raw, tracked=tracked, wire=wire)


def client_gone() -> Response:
    # What nginx logs for a client that closed the connection before the answer: nobody reads this one.
    return Response(status_code=499)


async def compact_and_forward(request: Request, wire: WireFormat, path: str) -> Response:
    """The request compacted in `wire`'s format, sent to the upstream's `path`, its answer relayed."""
    svc = services(request)
    compacted = await read_and_compact(request, tracked=True, wire=wire)
    if compacted is None:
        return client_gone()
    svc.metrics.compacted(compacted, wire.name)
    headers = upstream_request_headers(request.headers.raw)
    if compacted.expansion is not None:
        log_compacted(compacted, wire, None)
        return await svc.expander.forward(
            request, compacted.expansion, compacted.body, path, headers, compacted.response_headers()
        )
    response = await svc.upstream.open("POST", path, query=request.url.query, headers=headers, content=compacted.body)
    log_compacted(compacted, wire, response.status_code)
    return svc.upstream.relay(response, f"POST {path}", compacted.response_headers(), wire=wire)


def log_compacted(compacted: Compacted, wire: WireFormat, upstream_status: int | None) -> None:
    result = compacted.result
    logger.info(
        "%s chain=%s tokens=%d->%d upstream_status=%s",
        wire.name,
        compacted.chain.spec,
        result.tokens_before,
        result.tokens_after,
        "expand" if upstream_status is None else upstream_status,
        extra={
            "wire": wire.name,
            "chain": compacted.chain.spec,
            "tokens_before": result.tokens_before,
            "tokens_after": result.tokens_after,
            "upstream_status": upstream_status,
            "fallback": compacted.fallback,
            "prefix": compacted.prefix,
            "expand_offered": compacted.expansion is not None,
        },
    )


async def dry_run(request: Request, wire: WireFormat, sent: Callable[[Compacted], dict[str, Any]]) -> Response:
    """What the route of `wire` would send upstream (sent(compacted): its conversation's fields), with per-step
    stats. Nothing is forwarded.
    """
    compacted = await read_and_compact(request, tracked=False, wire=wire)
    if compacted is None:
        return client_gone()
    if not compacted.counted:
        raise ApiError(
            503,
            f"Compaction did not finish within compaction_deadline_seconds "
            f"({services(request).settings.compaction_deadline_seconds:g} s); the request would be forwarded "
            "uncompacted.",
            type="server_error",
            code="compaction_deadline",
        )
    result = compacted.result
    body = {
        **sent(compacted),
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


@router.post("/v1/chat/completions", openapi_extra=CHAT_OPENAPI, responses=CHAT_RESPONSES)
async def chat_completions(request: Request) -> Response:
    return await compact_and_forward(request, ChatCompletions(), "chat/completions")


@router.post("/compact", openapi_extra=COMPACT_OPENAPI, responses=COMPACT_RESPONSES)
async def compact(request: Request) -> Response:
    """Dry run: what /v1/chat/completions would send upstream, with per-step stats. Nothing is forwarded."""
    return await dry_run(request, ChatCompletions(), lambda compacted: {"messages": compacted.result.messages})
