from __future__ import annotations

from urllib.parse import unquote

from fastapi import APIRouter, Request, Response

from app.edge.body import limited_stream
from app.edge.errors import ApiError
from app.edge.headers import upstream_request_headers
from app.services import services
from app.settings import Api
from app.wire import AnthropicMessages, ChatCompletions, WireFormat

router = APIRouter()
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
_DOT_SEGMENTS = (".", "..")


def _path_problem(raw: str) -> str | None:
    lowered = raw.lower()
    # Each of these is read as a path separator, or decoded into one, by some server between the proxy and
    # the model (a CDN, a gateway, a Java or IIS server): what is forwarded under /v1 would reach another path.
    if "\\" in raw or "%5c" in lowered:
        return "backslashes"
    if "%2f" in lowered:
        return "encoded slashes (%2F)"
    if "%25" in lowered:
        return "double percent-encoding (%25)"
    for segment in raw.split("/"):
        # Path parameters: Tomcat and Jetty read "..;x" as "..".
        name = segment.split(";", 1)[0]
        try:
            decoded = unquote(name, errors="strict")
        except UnicodeDecodeError:  # overlong forms such as %c0%ae, which old servers decode to "."
            return "percent-encoded bytes that are not UTF-8"
        if decoded in _DOT_SEGMENTS:
            return "dot segments"
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in decoded):
            return "control characters"
    return None


def check_path(raw: str) -> None:
    """Raises a 400 invalid_path ApiError for a raw path that anything upstream could read as another path."""
    problem = _path_problem(raw)
    if problem is not None:
        raise ApiError(400, f"The path may not contain {problem}.", code="invalid_path")


def _api(rest: str, request: Request) -> Api:
    """Anthropic's upstream for its routes (/v1/messages/count_tokens, batches) and for any call one of its SDKs
    makes (they all send anthropic-version, /v1/models included); the OpenAI-compatible one for the rest.
    """
    anthropic = rest.split("/", 1)[0] == "messages" or "anthropic-version" in request.headers
    return "anthropic" if anthropic else "openai"


def _stream_format(api: Api) -> WireFormat:
    """Whose error event ends a passthrough stream the upstream broke off: the API's own."""
    return AnthropicMessages() if api == "anthropic" else ChatCompletions()


# Not in /openapi.json: what these paths accept and answer is the upstream's contract, not the proxy's.
@router.api_route("/v1/{path:path}", methods=METHODS, include_in_schema=False)
async def passthrough(path: str, request: Request) -> Response:
    """Every other /v1/* call (models, embeddings, files, count_tokens, ...) goes upstream unchanged, body streamed."""
    # The raw path keeps the client's percent-encoding exactly.
    raw_path = request.scope.get("raw_path", request.url.path.encode()).decode("latin-1").split("?", 1)[0]
    rest = raw_path.removeprefix("/v1/")
    check_path(rest)
    svc = services(request)
    has_body = "content-length" in request.headers or "transfer-encoding" in request.headers
    # Streamed, never buffered, yet under the same limit: an oversized body is refused before anything goes
    # upstream when Content-Length announces it, else the upstream request is aborted once it is exceeded.
    body = limited_stream(request, svc.settings.max_body_bytes) if has_body else None
    api = _api(rest, request)
    response = await svc.upstream.open(
        request.method,
        rest,
        query=request.url.query,
        headers=upstream_request_headers(request.headers.raw, keep_content_length=True),
        content=body,
        api=api,
    )
    return svc.upstream.relay(response, f"{request.method} {rest}", wire=_stream_format(api))
