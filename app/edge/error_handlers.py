"""The proxy's own errors answered in the shape of the API the route serves (app.wire.error_body): ApiError, the
framework's 404 and 405, and any exception nothing else handled.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.edge.errors import ApiError
from app.wire import error_body

logger = logging.getLogger("compaction_proxy.errors")


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
        status, message, headers = exc.status, exc.message, exc.headers
        path = request.url.path
        return error_response(path, status, message, type=exc.type, param=exc.param, code=exc.code, headers=headers)

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
