"""The compacted routes, a table of wire formats: each format's route (compacted, forwarded, the answer relayed:
app.forwarding) and its dry run (what would be sent, with per-step stats; nothing is forwarded).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from fastapi import APIRouter, Request, Response

from app.edge.body import read_body
from app.edge.errors import ApiError
from app.forwarding import Forwarding, client_gone
from app.routes.openapi import DOCS
from app.services import services
from app.wire import WireFormat, dump_json, parse_object

Endpoint = Callable[[Request], Awaitable[Response]]


def router(formats: Sequence[WireFormat]) -> APIRouter:
    """Two routes per format: its own path and its dry run's."""
    routes = APIRouter()
    for wire in formats:
        docs = DOCS[wire.name]
        routes.add_api_route(
            wire.path,
            _forwarded(wire),
            methods=["POST"],
            openapi_extra=docs.request,
            responses=docs.statuses,
            name=wire.name,
        )
        routes.add_api_route(
            wire.dry_run_path,
            _dry_run(wire),
            methods=["POST"],
            openapi_extra=docs.dry_run_request,
            responses=docs.dry_run_statuses,
            name=f"{wire.name} dry run",
            summary=f"Dry run of {wire.path}",
            description=f"What {wire.path} would send upstream, with per-step stats. Nothing is forwarded.",
        )
    return routes


def _forwarded(wire: WireFormat) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        forwarding = await Forwarding.read(request, services(request), wire.for_request(request.headers))
        return await forwarding.respond()

    return endpoint


def _dry_run(wire: WireFormat) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        return await dry_run(request, wire.for_request(request.headers))

    return endpoint


async def dry_run(request: Request, wire: WireFormat) -> Response:
    """What the route of `wire` would send upstream (its conversation's fields, as they would go), the tokens before
    and after, and each step's.
    """
    svc = services(request)
    raw = await read_body(request, svc.settings.max_body_bytes)
    compacted = await svc.compactor.compact_request(request, raw, wire, tracked=False)
    if compacted is None:
        return client_gone()
    if not compacted.counted:
        raise ApiError(
            503,
            f"Compaction did not finish within compaction_deadline_seconds "
            f"({svc.settings.compaction_deadline_seconds:g} s); the request would be forwarded uncompacted.",
            type="server_error",
            code="compaction_deadline",
        )
    result = compacted.result
    sent, _ = parse_object(compacted.body, svc.settings.max_json_depth)  # what would go, as it would go
    body = {
        **wire.dry_run_fields(sent),
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "added_tools": compacted.expansion.added_tools() if compacted.expansion else [],
        "steps": [
            {"strategy": s.strategy, "tokens_before": s.tokens_before, "tokens_after": s.tokens_after, "ms": s.ms}
            | s.details
            for s in result.steps
        ],
    }
    response = Response(dump_json(body), media_type="application/json")
    response.raw_headers.extend(compacted.response_headers())
    return response
