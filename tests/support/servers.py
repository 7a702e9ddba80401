"""Run an ASGI app under a real uvicorn server on a loopback port, in a background thread."""

from __future__ import annotations

import ctypes
import ctypes.util
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from app.server.serve import server_config
from app.settings import Settings

_LIBC = ctypes.util.find_library("c")
# glibc's malloc_trim; None where the C library has none (musl, macOS).
MALLOC_TRIM = getattr(ctypes.CDLL(_LIBC), "malloc_trim", None) if _LIBC else None


class LoopbackServer:
    def __init__(self, app: Any, settings: Settings | None = None, **extra: Any) -> None:
        """settings: serve as the CLI does (app.server.serve.server_config: the proxy's protocol class and client
        limits); extra overrides uvicorn settings. None: uvicorn's defaults, for the stand-in upstream.
        """
        where = dict(host="127.0.0.1", port=0, log_level="warning", lifespan="on", access_log=False)
        config = (
            uvicorn.Config(app, **where, **extra)
            if settings is None
            else server_config(app, settings, **{**where, **extra})
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LoopbackServer:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        # What stopped servers freed, glibc keeps in the arenas of the threads that used it (each server has its
        # own threads); handed back to the system, so the process's resident size is what it still uses: 1.21 GB
        # -> 0.80 GB at the end of tests/app. A few milliseconds.
        if MALLOC_TRIM is not None:
            MALLOC_TRIM(0)

    @property
    def port(self) -> int:
        port: int = self.server.servers[0].sockets[0].getsockname()[1]
        return port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextmanager
def unanswered_port(*, backlog_full: bool) -> Iterator[int]:
    """A loopback port whose listener never accepts a connection, so nothing is ever read or answered.

    backlog_full: its accept queue is already full, so the kernel ignores new connection attempts and
    connecting hangs (shows the connect timeout). Otherwise connections complete in the kernel and
    writes succeed until the socket buffers fill, then block (shows the write timeout).
    """
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0 if backlog_full else 8)
        port: int = listener.getsockname()[1]
        # Linux queues backlog + 1 connections; this one fills the queue.
        fillers = [socket.create_connection(("127.0.0.1", port), timeout=5)] if backlog_full else []
        try:
            yield port
        finally:
            for filler in fillers:
                filler.close()


def refuses_connections(port: int) -> bool:
    """Whether nothing accepts connections on this loopback port any more."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return False
    except ConnectionRefusedError:
        return True
