"""GET /savings, the savings ledger's figures (behind the proxy keys), and GET /dashboard, the page that shows them
(open to anyone: it holds none of them)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from app.cache import CacheError
from app.edge.errors import ApiError
from app.routes.openapi import ErrorResponse
from app.savings.report import report
from app.services import services

router = APIRouter()
page_router = APIRouter()


@router.get(
    "/savings",
    responses={
        401: {"model": ErrorResponse, "description": "api_keys is set and none was sent."},
        503: {"model": ErrorResponse, "description": "The store at cache_url cannot be read."},
    },
)
async def savings(request: Request, response: Response) -> dict[str, Any]:
    """What compaction saved, per wire format and model, in total and per minute (docs/savings.md)."""
    svc = services(request)
    ledger = svc.ledger
    try:
        tally = await ledger.read_async()
    except CacheError:
        raise ApiError(
            503, "The savings ledger's store cannot be read.", type="server_error", code="savings_unavailable"
        ) from None
    response.headers["cache-control"] = "no-store"
    return report(tally, store=ledger.store.name, history_minutes=ledger.history_minutes, max_models=ledger.max_models)


@page_router.get("/dashboard", include_in_schema=False)
async def dashboard(request: Request) -> Response:
    page = services(request).dashboard
    return Response(page.body, media_type="text/html; charset=utf-8", headers=page.headers)
