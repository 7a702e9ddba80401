"""GET /inspect: what compaction did to each message of the most recent forwarded requests (app.compaction.inspect)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.edge.errors import ApiError
from app.services import services
from app.wire import dump_json

router = APIRouter()


@router.get("/inspect")
async def inspect(request: Request) -> Response:
    """The newest entries first, `?n=N` of them at most; 404 (`inspect_off`) while inspect_requests is 0."""
    ring = services(request).inspect
    if ring is None:
        raise ApiError(
            404,
            "The inspect ring is off: set inspect_requests (COMPACTION_INSPECT_REQUESTS) to how many recent requests "
            "to keep. It holds previews of their content, so it is off by default.",
            code="inspect_off",
        )
    n = request.query_params.get("n")
    if n is not None and not (n.isdigit() and int(n) >= 1):
        raise ApiError(400, "n must be a whole number from 1.", param="n", code="invalid_n")
    body = {"inspect_requests": ring.size, "requests": ring.recent(int(n) if n is not None else None)}
    return Response(dump_json(body), media_type="application/json")
