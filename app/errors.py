"""Errors the proxy itself raises, answered in the shape of the API the route serves: Anthropic's
(`{"type": "error", "error": {"type", "message"}}`) on /v1/messages and its dry run, OpenAI's everywhere else.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger("compaction_proxy.errors")
# Routes whose clients are Anthropic's SDKs, which read only Anthropic's error shape.
ANTHROPIC_ROUTES = ("/v1/messages", "/compact/messages")
# Anthropic's error types by status (its "Errors" page); what it has no status for falls to the class of its status.
_ANTHROPIC_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def anthropic_route(path: str) -> bool:
    return any(path == route or path.startswith(route + "/") for route in ANTHROPIC_ROUTES)


def error_body(
    path: str, status: int, message: str, *, type: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """The one place an error's shape is decided, by the route it answers (`path`, without the query)."""
    if anthropic_route(path):
        kind = _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


class ApiError(Exception):
    """An error the client should see as `{"error": {"message", "type", "param", "code"}}` (error_body: in
    Anthropic's shape on its routes, where only the message and a type by status remain).
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers

    def response(self, path: str = "") -> JSONResponse:
        return error_response(
            path, self.status, self.message, type=self.type, param=self.param, code=self.code, headers=self.headers
        )


def error_response(
    path: str,
    status: int,
    message: str,
    *,
    type: str,
    param: str | None = None,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = error_body(path, status, message, type=type, param=param, code=code)
    return JSONResponse(body, status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return exc.response(request.url.path)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        return error_response(
            request.url.path, exc.status_code, str(exc.detail), type="invalid_request_error", code=code
        )

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(StarletteHTTPException, http_error)


class InternalErrorMiddleware:
    """The one handler for exceptions nothing else handled: a 500 in the route's error shape instead of the server's
    plain-text one, logged once with its traceback.

    Pure ASGI inside the request-id middleware, so the answer and the log line carry the request's id; Starlette's
    own handler for Exception sits outside every middleware and re-raises, so the server would log it again.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            # The method and the route template, never the path or query string (clients put keys there) nor
            # headers; the traceback's text goes through the handler's redaction like every line.
            route = getattr(scope.get("route"), "path", "unmatched")
            logger.exception("unhandled error on %s %s", scope.get("method"), route)
            if started:
                # Returning with the response unfinished makes the server drop the connection: the client sees
                # a cut-off answer, never a short one that looks whole.
                return
            response = error_response(
                scope.get("path", ""),
                500,
                "The proxy failed to handle the request.",
                type="server_error",
                code="internal_error",
            )
            await response(scope, receive, send)
