"""The error the proxy raises wherever it refuses a request; app.edge.error_handlers answers it."""

from __future__ import annotations

from collections.abc import Mapping


class ApiError(Exception):
    """An error the proxy answers itself, in the error shape of the route's API (app.wire.error_body): OpenAI's
    `{"error": {"message", "type", "param", "code"}}`, or Anthropic's, where only the message and a type by status
    remain.
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
