from __future__ import annotations

from urllib.parse import unquote

from fastapi import APIRouter, Request, Response

from ..errors import ApiError
from ..headers import upstream_request_headers
from ..services import services
from ..upstream import relay

router = APIRouter()
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


@router.api_route("/v1/{path:path}", methods=METHODS)
async def passthrough(path: str, request: Request) -> Response:
    """Every other /v1/* call (models, embeddings, files, ...) goes upstream unchanged, body streamed."""
    # The raw path keeps the client's percent-encoding exactly.
    raw_path = request.scope.get("raw_path", request.url.path.encode()).decode("latin-1").split("?", 1)[0]
    rest = raw_path.removeprefix("/v1/")
    if any(unquote(segment) in (".", "..") for segment in rest.split("/")):
        raise ApiError(400, "Dot segments are not allowed in the path.", code="invalid_path")
    has_body = "content-length" in request.headers or "transfer-encoding" in request.headers
    response = await services(request).upstream.open(
        request.method,
        rest,
        query=request.url.query,
        headers=upstream_request_headers(request.headers.raw, keep_content_length=True),
        content=request.stream() if has_body else None,
    )
    return relay(response)
