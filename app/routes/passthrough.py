from __future__ import annotations

from urllib.parse import unquote

from fastapi import APIRouter, Request, Response

from ..errors import ApiError
from ..headers import upstream_request_headers
from ..limits import limited_stream
from ..services import services

router = APIRouter()
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


# Not in /openapi.json: what these paths accept and answer is the upstream's contract, not the proxy's.
@router.api_route("/v1/{path:path}", methods=METHODS, include_in_schema=False)
async def passthrough(path: str, request: Request) -> Response:
    """Every other /v1/* call (models, embeddings, files, ...) goes upstream unchanged, body streamed."""
    # The raw path keeps the client's percent-encoding exactly.
    raw_path = request.scope.get("raw_path", request.url.path.encode()).decode("latin-1").split("?", 1)[0]
    rest = raw_path.removeprefix("/v1/")
    if any(unquote(segment) in (".", "..") for segment in rest.split("/")):
        raise ApiError(400, "Dot segments are not allowed in the path.", code="invalid_path")
    svc = services(request)
    has_body = "content-length" in request.headers or "transfer-encoding" in request.headers
    # Streamed, never buffered, yet under the same limit: an oversized body is refused before anything goes
    # upstream when Content-Length announces it, else the upstream request is aborted once it is exceeded.
    body = limited_stream(request, svc.settings.max_body_bytes) if has_body else None
    response = await svc.upstream.open(
        request.method,
        rest,
        query=request.url.query,
        headers=upstream_request_headers(request.headers.raw, keep_content_length=True),
        content=body,
    )
    return svc.upstream.relay(response, f"{request.method} {rest}")
