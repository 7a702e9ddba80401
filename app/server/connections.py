"""Client connections: how many may be open, how long a request head may take to arrive, how large it may be.

uvicorn closes a kept-alive connection that stays idle, but holds for ever one that opens and sends nothing or never
finishes its request head; it takes a head of any size (httptools has no limit); and it accepts connections until
the process runs out of file descriptors, after which nothing is answered, /healthz included. The protocol classes
here are uvicorn's own (httptools, or h11 where httptools is missing) with three limits of the proxy's settings
added, each per process:

- request_head_timeout_seconds: from the moment a connection opens, and on a kept-alive connection from the first
  byte of each new request, the request head must be complete within this time; otherwise the connection is closed
  (with a 408 if part of a head came). Between requests, keep_alive_seconds applies as before.
- max_header_bytes: a request head (request line and headers) larger than this is a 431 and the connection closed.
  Only the head's bytes are handed to the parser until it is complete, so a larger one is never held in memory.
- max_client_connections: a connection past it closes the one that has waited longest for a request (idle between
  requests, or still sending a head), so that idle sockets cannot lock everyone else out; when every connection has
  a request in flight, the new one is answered 503 and closed at once.

Everything they answer is in the error shape of the route the request line names (app.wire.error_body), uvicorn's
own 400 for a malformed request included.
"""

from __future__ import annotations

import asyncio
import http
import logging
import resource
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import h11
import orjson
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from app.settings import Settings
from app.wire import error_body

logger = logging.getLogger("compaction_proxy.connections")
# At most one warning line this often while connections are being closed or refused for the limit.
REPORT_EVERY_SECONDS = 60.0
# How long a connection answered with an error of the protocol layer is still read (and discarded) at most.
LINGER_SECONDS = 2.0


@dataclass(frozen=True)
class ClientLimits:
    max_connections: int
    head_timeout: float
    max_head_bytes: int

    @classmethod
    def from_settings(cls, settings: Settings) -> ClientLimits:
        return cls(settings.max_client_connections, settings.request_head_timeout_seconds, settings.max_header_bytes)


class ClientConnections:
    """The connections of one server process that wait for a request, longest first: the ones to close when a new
    connection finds the limit reached.
    """

    def __init__(self, limits: ClientLimits) -> None:
        self.limits = limits
        self.waiting: OrderedDict[LimitedProtocol, None] = OrderedDict()
        self._closed = self._refused = 0
        self._reported = -REPORT_EVERY_SECONDS

    def make_room(self, open_connections: int) -> bool:
        """Whether a new connection may be served, closing the longest-waiting one if the limit is reached."""
        if open_connections < self.limits.max_connections:
            return True
        admitted = bool(self.waiting)
        if admitted:
            oldest, _ = self.waiting.popitem(last=False)
            oldest.close_waiting()
            self._closed += 1
        else:
            self._refused += 1
        self._report()
        return admitted

    def _report(self) -> None:
        now = time.monotonic()
        if now - self._reported < REPORT_EVERY_SECONDS:
            return
        logger.warning(
            "max_client_connections (%d) reached: %d waiting connections closed to make room and %d new ones "
            "refused with a 503 since the last report",
            self.limits.max_connections,
            self._closed,
            self._refused,
        )
        self._closed = self._refused = 0
        self._reported = now


def error_bytes(
    status: int, message: str, code: str, default_headers: list[tuple[bytes, bytes]], path: str = ""
) -> bytes:
    """A whole response in the error shape of `path`'s route that closes the connection, written below the ASGI app."""
    kind = "server_error" if status >= 500 else "invalid_request_error"
    body = orjson.dumps(error_body(path, status, message, type=kind, code=code))
    head = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n".encode()]
    head += [name + b": " + value + b"\r\n" for name, value in default_headers]
    head += [b"content-type: application/json\r\n", b"content-length: %d\r\n" % len(body), b"connection: close\r\n"]
    return b"".join([*head, b"\r\n", body])


_REQUEST_LINE_BYTES = 2048


def _target_path(head: bytes) -> str:
    """The path of a request line (`POST /v1/messages?beta=true HTTP/1.1`); "" where none can be read."""
    parts = head.split(b"\n", 1)[0].split(b" ")
    return parts[1].split(b"?", 1)[0].decode("latin-1") if len(parts) >= 2 else ""


class LimitedProtocol(asyncio.Protocol):
    """The limits, for a subclass of one of uvicorn's HTTP protocol classes (whose attributes it uses)."""

    # uvicorn's own, set by its __init__ and connection_made.
    config: uvicorn.Config
    connections: set[Any]
    server_state: ServerState
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    cycle: Any

    clients: ClientConnections
    _head_timer: asyncio.TimerHandle | None = None
    _head_bytes = 0
    _head_start = b""  # the first bytes of the request head: its request line names the route an error answers
    _refused = False
    _finished = False  # answered with an error of the protocol layer: whatever still comes is discarded

    # --- what a subclass tells about its parser ---

    def _in_head(self) -> bool:
        """Whether the bytes that arrive now belong to a request head."""
        raise NotImplementedError

    def _partial_head(self) -> bool:
        """Whether part of a request head has been received, the rest not yet."""
        raise NotImplementedError

    def _request_in_flight(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    # --- asyncio.Protocol ---

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        clients = getattr(self.config, "client_connections", None)
        if not isinstance(clients, ClientConnections):
            raise TypeError(
                "serve the proxy with app.server.serve.server_config, whose config carries the client limits"
            )
        self.clients = clients
        if not clients.make_room(len(self.connections)):
            # Never counted, never read: the socket costs a file descriptor only until the next loop iteration.
            self._refused = True
            message = "The proxy has as many connections open as it accepts (setting max_client_connections)."
            transport.write(error_bytes(503, message, "too_many_connections", self.server_state.default_headers))
            transport.close()
            return
        super().connection_made(transport)
        clients.waiting[self] = None
        self._start_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._refused:
            return
        self._stop_waiting()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._finished:
            return
        if self._head_timer is None and not self._request_in_flight():
            # A new request begins on a kept-alive connection (or the rest of a body the answer did not wait for).
            self._start_head_timer()
        if self._in_head():
            if not self._head_bytes:
                self._head_start = data[:_REQUEST_LINE_BYTES]
            room = self.clients.limits.max_head_bytes - self._head_bytes
            if len(data) > room:
                self._feed_at_most(data, room)
                return
            self._head_bytes += len(data)
        self._feed(data)

    # --- uvicorn's HTTP protocol ---

    def send_400_response(self, msg: str) -> None:
        self._finish(400, msg, "invalid_http_request")

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if self.transport.is_closing() or self._request_in_flight():
            return
        self.clients.waiting[self] = None  # at the end: it has waited least
        if self._head_timer is None and self._partial_head():
            self._start_head_timer()  # part of the next head came while this request was in flight

    # --- the limits ---

    def close_waiting(self) -> None:
        """Closed to make room for a new connection (ClientConnections.make_room)."""
        self._stop_waiting()
        self.transport.close()

    def _feed(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.get_protocol() is not self:  # upgraded to a WebSocket: no longer an HTTP head to wait for
            self._head_complete()

    def _feed_at_most(self, data: bytes, room: int) -> None:
        """The head must end within `room` more bytes: only those go to the parser, the rest once it has."""
        if room:  # never an empty feed: h11 takes b"" for the end of the stream
            self._feed(data[:room])
        if self._finished or self.transport.is_closing():
            return
        if self._in_head():
            limit = self.clients.limits.max_head_bytes
            message = f"The request head is larger than this proxy accepts ({limit} bytes; setting max_header_bytes)."
            self._finish(431, message, "request_header_too_large")
            return
        protocol = self.transport.get_protocol()
        if isinstance(protocol, asyncio.Protocol):
            protocol.data_received(data[room:])  # the body, the next pipelined request or a WebSocket's frames

    def _head_complete(self) -> None:
        """Called by the subclass once the parser has a whole request head: the request is in flight."""
        self._stop_waiting()
        self._head_bytes = 0

    def _start_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.clients.limits.head_timeout, self._head_timed_out)

    def _stop_waiting(self) -> None:
        self.clients.waiting.pop(self, None)
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.transport.get_protocol() is not self or self._request_in_flight():
            return
        if self._partial_head():
            timeout = self.clients.limits.head_timeout
            message = f"The request head did not arrive within {timeout:g} s (setting request_head_timeout_seconds)."
            self._finish(408, message, "request_timeout")
        else:  # nothing of a request: nothing to answer
            self._stop_waiting()
            self.transport.close()

    def _finish(self, status: int, message: str, code: str) -> None:
        """Answer with an error and end the connection. Closing a socket with unread input resets the connection,
        and a reset can destroy the answer on its way: so the proxy half-closes, discards what still comes, and
        closes once the client has (uvicorn closes on its end of stream) or after LINGER_SECONDS.
        """
        self._stop_waiting()
        self._finished = True
        headers = self.server_state.default_headers
        self.transport.write(error_bytes(status, message, code, headers, _target_path(self._head_start)))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)


class H11Limited(LimitedProtocol, H11Protocol):
    """uvicorn's h11 protocol, which uvicorn uses where httptools is not installed, with the client limits."""

    def _in_head(self) -> bool:
        # Not DONE: the request has ended and h11 holds back what follows (a pipelined request, its reading paused)
        # until the answer has.
        return self.conn.their_state is h11.IDLE

    def _partial_head(self) -> bool:
        return self._in_head() and bool(self.conn.trailing_data[0])  # h11 parses a head once it is whole

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:  # a new request: its head is complete
            self._head_complete()


def raise_open_file_limit(needed: int) -> None:
    """Raise this process's soft RLIMIT_NOFILE towards its hard limit so that `needed` descriptors fit (workers
    inherit it). Lowering is never needed; a hard limit below `needed` is only reported, as nothing else can fix it.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        logger.info("raised the open-file limit (RLIMIT_NOFILE) from %d to %d for client connections", soft, target)
    if target < needed:
        logger.warning(
            "the open-file limit (RLIMIT_NOFILE, hard %d) is below the %d the connection limits need: lower "
            "max_client_connections or raise the hard limit (ulimit -Hn, systemd LimitNOFILE=, docker --ulimit "
            "nofile=)",
            hard,
            needed,
        )
