from __future__ import annotations

import logging

from fastapi import APIRouter, Request, Response

from strategies.deadline import CompactionStopped, Deadline

from ..compaction import STRATEGIES_HEADER, Compacted
from ..disconnect import unless_disconnected
from ..errors import ApiError
from ..headers import upstream_request_headers
from ..jsonbody import dump_json
from ..limits import read_body
from ..notes import NotesTools
from ..openapi import CHAT_OPENAPI, CHAT_RESPONSES, COMPACT_OPENAPI, COMPACT_RESPONSES
from ..prefix_tracking import PrefixTracker
from ..services import services
from ..summariser import INTERNAL_HEADER

router = APIRouter()
logger = logging.getLogger("compaction_proxy.chat")


def chain_header(request: Request) -> str | None:
    """The chain the request asks for. A summariser call of a proxy (this one's, looped back by configuration,
    or another's) is never compacted, whatever else it says: its input is what is being summarised.
    """
    if request.headers.get(INTERNAL_HEADER) is not None:
        return "none"
    return request.headers.get(STRATEGIES_HEADER)


def prefix_tracker(request: Request) -> PrefixTracker | None:
    """None for a summariser call: it is the proxy's own request, not a conversation of the client's."""
    if request.headers.get(INTERNAL_HEADER) is not None:
        return None
    return services(request).prefix


def notes_tools(request: Request, deadline: Deadline, scope: bytes) -> NotesTools | None:
    notes = services(request).notes
    return notes.for_request(request.headers.raw, deadline, scope) if notes is not None else None


async def compacted_body(request: Request, raw: bytes, *, tracked: bool) -> Compacted | None:
    """The request compacted; None when the client went away meanwhile (the work then stops)."""
    svc = services(request)
    deadline = svc.compactor.deadline()
    # Who asks (authenticate has accepted the key): what the proxy keeps for a client is kept apart per client.
    scope = svc.keys.client_scope(request.headers.raw)
    notes = notes_tools(request, deadline, scope)
    prefix = prefix_tracker(request) if tracked else None
    try:
        # trace: per-step timings for the metrics and /compact, at the cost of a token count per step (cached).
        return await unless_disconnected(
            request,
            deadline,
            lambda: svc.compactor.compact(
                raw, chain_header(request), deadline, trace=True, notes=notes, prefix=prefix, scope=scope
            ),
        )
    except CompactionStopped:
        logger.info("the client went away during compaction; it was stopped")
        return None


def client_gone() -> Response:
    # What nginx logs for a client that closed the connection before the answer: nobody reads this one.
    return Response(status_code=499)


@router.post("/v1/chat/completions", openapi_extra=CHAT_OPENAPI, responses=CHAT_RESPONSES)
async def chat_completions(request: Request) -> Response:
    svc = services(request)
    raw = await read_body(request, svc.settings.max_body_bytes)
    compacted = await compacted_body(request, raw, tracked=True)
    if compacted is None:
        return client_gone()
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
            "prefix": compacted.prefix,
        },
    )
    return svc.upstream.relay(response, "POST chat/completions", compacted.response_headers())


@router.post("/compact", openapi_extra=COMPACT_OPENAPI, responses=COMPACT_RESPONSES)
async def compact(request: Request) -> Response:
    """Dry run: what /v1/chat/completions would send upstream, with per-step stats. Nothing is forwarded."""
    svc = services(request)
    raw = await read_body(request, svc.settings.max_body_bytes)
    compacted = await compacted_body(request, raw, tracked=False)
    if compacted is None:
        return client_gone()
    if not compacted.counted:
        raise ApiError(
            503,
            f"Compaction did not finish within compaction_deadline_seconds "
            f"({svc.settings.compaction_deadline_seconds:g} s); a chat completion would be forwarded uncompacted.",
            type="server_error",
            code="compaction_deadline",
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
    response = Response(dump_json(body), media_type="application/json")
    response.raw_headers.extend(compacted.response_headers())
    return response
