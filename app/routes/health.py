from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST

from ..errors import ApiError
from ..openapi import ErrorResponse
from ..services import services

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"model": ErrorResponse, "description": "Shutting down."}})
async def readyz(request: Request) -> dict[str, str]:
    """Readiness: started and not shutting down, so a load balancer may send new requests."""
    if not services(request).readiness.ready:
        raise ApiError(503, "The proxy is shutting down.", type="server_error", code="not_ready")
    return {"status": "ready"}


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request) -> Response:
    return Response(services(request).metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
