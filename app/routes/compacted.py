"""What every compacted route does, whatever its wire format (chat, responses, messages): read and compact the
body, then forward it upstream and relay the answer (compact_and_forward), or answer what would have gone (dry_run).
Each route names its format, its upstream path and API, and its logger.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import Request, Response

from ..auth import Api
from ..compaction import Compacted
from ..errors import ApiError
from ..expansion import added_tools
from ..headers import upstream_request_headers
from ..limits import read_body
from ..services import services
from ..wire import WireFormat, dump_json


async def read_and_compact(request: Request, *, tracked: bool, wire: WireFormat) -> Compacted | None:
    """The request's body, read and compacted; None when the client went away meanwhile."""
    svc = services(request)
    raw = await read_body(request, svc.settings.max_body_bytes)
    return await svc.compactor.compact_request(request, raw, tracked=tracked, wire=wire)


def client_gone() -> Response:
    # What nginx logs for a client that closed the connection before the answer: nobody reads this one.
    return Response(status_code=499)


async def compact_and_forward(
    request: Request, wire: WireFormat, path: str, logger: logging.Logger, api: Api = "openai"
) -> Response:
    """The request compacted in `wire`'s format, sent to `path` of that API's upstream with the client's query and
    headers, its answer relayed. One line to `logger` (the route's) says what compaction did.
    """
    svc = services(request)
    compacted = await read_and_compact(request, tracked=True, wire=wire)
    if compacted is None:
        return client_gone()
    svc.metrics.compacted(compacted, wire.name)
    headers = upstream_request_headers(request.headers.raw)
    if compacted.expansion is not None:
        _log(logger, compacted, wire, None)
        return await svc.expander.forward(
            request, compacted.expansion, compacted.body, path, headers, compacted.response_headers()
        )
    response = await svc.upstream.open(
        "POST", path, query=request.url.query, headers=headers, content=compacted.body, api=api
    )
    _log(logger, compacted, wire, response.status_code)
    return svc.upstream.relay(response, f"POST {path}", compacted.response_headers(), wire=wire)


def _log(logger: logging.Logger, compacted: Compacted, wire: WireFormat, upstream_status: int | None) -> None:
    """What compaction did, in one line; upstream_status None: the proxy answers the expand rounds first."""
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
    """What the route of `wire` would send upstream (sent(compacted): its conversation's fields, as they would go),
    the tokens before and after, and each step's. Nothing is forwarded.
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
