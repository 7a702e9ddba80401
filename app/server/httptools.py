"""uvicorn's httptools protocol with the client limits (app.server.connections); apart, so that importing it is what
tells whether httptools is installed.
"""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.server.connections import LimitedProtocol


class HttpToolsLimited(LimitedProtocol, HttpToolsProtocol):
    """The protocol uvicorn uses with httptools (uvicorn[standard]), with the client limits."""

    _parsing_head = True  # from the connection's opening until the first head is complete
    _head_begun = False  # the parser has seen the first bytes of a request head, not yet its end

    def _in_head(self) -> bool:
        return self._parsing_head

    def _partial_head(self) -> bool:
        return self._head_begun

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_begun = True

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._parsing_head = self._head_begun = False
        self._head_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        # Whatever follows is the next request's head (pipelined, or on the kept-alive connection).
        self._parsing_head = True
