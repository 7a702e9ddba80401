"""Errors the proxy itself raises, answered in OpenAI's error shape."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger("compaction_proxy.errors")


class ApiError(Exception):
    """An error the client should see as `{"error": {"message", "type", "param", "code"}}`."""

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

    def response(self) -> JSONResponse:
        return error_response(
            self.status, self.message, type=self.type, param=self.param, code=self.code, headers=self.headers
        )


def error_response(
    status: int,
    message: str,
    *,
    type: str,
    param: str | None = None,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = {"error": {"message": message, "type": type, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return exc.response()

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        return error_response(exc.status_code, str(exc.detail), type="invalid_request_error", code=code)

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(StarletteHTTPException, http_error)


class InternalErrorMiddleware:
    """The one handler for exceptions nothing else handled: a 500 in OpenAI's shape instead of the server's
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
                500, "The proxy failed to handle the request.", type="server_error", code="internal_error"
            )
            await response(scope, receive, send)
