"""What every compacted route does, whatever its wire format (chat, responses, messages): read and compact the
body, then forward it upstream and relay the answer (compact_and_forward), or answer what would have gone (dry_run).
Each route names its format, its upstream path and API, and its logger.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import httpx
from fastapi import Request, Response

from ..auth import Api
from ..compaction import Compacted
from ..errors import ApiError
from ..expansion import Expansion, added_tools
from ..fitting import compact_known, send_fitted, usage_observer
from ..headers import RETRIED, upstream_request_headers
from ..limits import read_body
from ..services import services
from ..wire import WireFormat, dump_json


async def read_and_compact(request: Request, *, tracked: bool, wire: WireFormat) -> Compacted | None:
    """The request's body, read and compacted; None when the client went away meanwhile."""
    svc = services(request)
    raw = await read_body(request, svc.settings.max_body_bytes)
    return await svc.compactor.compact_request(request, raw, tracked=tracked, wire=wire)


class ClientGone(Exception):
    """The client went away while its request was compacted again."""


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
    raw = await read_body(request, svc.settings.max_body_bytes)
    compacted = await svc.compactor.compact_request(request, raw, tracked=True, wire=wire)
    if compacted is not None:  # fitted to the model's window (app.fitting)
        compacted = await compact_known(request, svc, raw, wire, compacted)
    if compacted is None:
        return client_gone()
    if compacted.expansion is not None:
        extra = compacted.response_headers()
        first_compacted = compacted

        async def first(body: bytes) -> tuple[httpx.Response, Expansion | None]:
            # The first round fitted like any request: a retry compacts again, and the rounds go on from that.
            sent = await send_fitted(request, svc, raw, wire, path, first_compacted, api)
            if sent is None:
                raise ClientGone()
            if sent.retried:
                extra[:] = sent.compacted.response_headers() + [(RETRIED, b"context_length_exceeded")]
            return sent.response, sent.compacted.expansion

        svc.metrics.compacted(compacted, wire.name)
        _log(logger, compacted, wire, None)
        headers = upstream_request_headers(request.headers.raw)
        try:
            return await svc.expander.forward(request, compacted.expansion, compacted.body, path, headers, extra, first)
        except ClientGone:
            return client_gone()
    sent = await send_fitted(request, svc, raw, wire, path, compacted, api)
    if sent is None:
        return client_gone()
    compacted, response = sent.compacted, sent.response
    svc.metrics.compacted(compacted, wire.name)
    _log(logger, compacted, wire, response.status_code, sent.retried)
    retried = [(RETRIED, b"context_length_exceeded")] if sent.retried else []
    observe = usage_observer(svc, compacted) if response.status_code == 200 else None
    return svc.upstream.relay(
        response, f"POST {path}", compacted.response_headers() + retried, wire=wire, on_complete=observe
    )


def _log(
    logger: logging.Logger, compacted: Compacted, wire: WireFormat, upstream_status: int | None, retried: bool = False
) -> None:
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
            "retried": retried,
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
