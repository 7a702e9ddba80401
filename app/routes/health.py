from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST

from app.edge.errors import ApiError
from app.routes.openapi import ErrorResponse
from app.services import services

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.head("/", include_in_schema=False)
async def reachable() -> Response:
    """Claude Code's probe at start (HEAD /): the base URL answers."""
    return Response()


@router.get(
    "/readyz", responses={503: {"model": ErrorResponse, "description": "Shutting down, or large-request lane full."}}
)
async def readyz(request: Request) -> dict[str, Any]:
    """Readiness: started, not shutting down and not refusing large requests (app.compaction.lanes), so a load balancer
    may send new requests. The answer shows each compaction lane's threads, running and waiting requests.
    """
    svc = services(request)
    if not svc.readiness.ready:
        raise ApiError(503, "The proxy is shutting down.", type="server_error", code="not_ready")
    lanes = svc.compactor.lanes
    if lanes.saturated:
        large = lanes.large
        raise ApiError(
            503,
            f"The large-request lane is full: {large.running} compacting, {large.waiting} waiting with "
            f"{large.waiting_bytes} bytes (large_compaction_threads {large.threads}, "
            f"large_compaction_queue_bytes {large.queue_bytes}).",
            type="server_error",
            code="saturated",
        )
    return {"status": "ready", "compaction": lanes.stats()}


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request) -> Response:
    return Response(services(request).metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
