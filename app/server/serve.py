"""The uvicorn server the CLI runs: on SIGTERM or SIGINT it stops accepting, marks the app not ready and
drains in-flight requests (streams included) for up to shutdown_grace_seconds before cutting them.

With --workers, uvicorn's supervisor creates each worker's server itself, a plain uvicorn.Server: it drains
the same way; only the readiness flag, which no new connection could see anyway, is left as it is.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from types import FrameType
from typing import Any

import uvicorn

from app.server.connections import ClientConnections, ClientLimits, H11Limited
from app.server.readiness import Readiness
from app.settings import Settings

logger = logging.getLogger("compaction_proxy.server")


def http_protocol() -> type[asyncio.Protocol]:
    """The protocol class uvicorn itself would pick ("auto"): httptools when installed, else h11."""
    try:
        from app.server.httptools import HttpToolsLimited
    except ImportError:  # no httptools for this platform: uvicorn[standard] installs it everywhere it can
        return H11Limited
    return HttpToolsLimited


class ProxyConfig(uvicorn.Config):
    """uvicorn's settings plus the client limits, which the protocol classes read from the config they are given.
    Module level, so that it pickles into the worker processes of --workers, each of which gets its own
    ClientConnections.
    """

    def __init__(self, app: Any, *, client_limits: ClientLimits, **kwargs: Any) -> None:
        kwargs.setdefault("http", http_protocol())
        # h11 buffers up to this much of an incomplete head itself; the protocol never feeds it more.
        super().__init__(app, h11_max_incomplete_event_size=client_limits.max_head_bytes, **kwargs)
        self.client_limits = client_limits
        self.client_connections = ClientConnections(client_limits)


def server_config(app: Any, settings: Settings, **extra: Any) -> ProxyConfig:
    """uvicorn's settings for the proxy, one process or a supervisor with workers alike; `extra` overrides them."""
    options: dict[str, Any] = dict(
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        # None: uvicorn's own lines go through our handler, as JSON with the request id like the rest.
        log_config=None,
        # Our own log lines carry no query strings; some clients put keys there.
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=settings.shutdown_grace_seconds,
        # A client that reuses a connection just as the server closes it for idleness gets a reset, not an
        # answer; POSTs are not retried. Outlasting the client's own idle timeout avoids that race.
        timeout_keep_alive=settings.keep_alive_seconds,
    )
    return ProxyConfig(app, client_limits=ClientLimits.from_settings(settings), **{**options, **extra})


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, readiness: Readiness) -> None:
        super().__init__(config)
        self.readiness = readiness

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Runs on the event loop once the signal has been seen, so logging here is safe (unlike in the
        # signal handler itself). uvicorn closes the listening sockets first thing in shutdown().
        self.readiness.stop()
        logger.info(
            "shutting down: no new connections, /readyz answers 503, in-flight requests get up to %ss",
            self.config.timeout_graceful_shutdown,
        )
        await super().shutdown(sockets)


def exit_cleanly_after_drain() -> None:
    """uvicorn re-raises the signal that stopped it once it has shut down, so that the default action runs;
    for SIGTERM that kills the process with -15 even after a clean drain. Exit 0 instead: stopping when
    asked to is success. Installed before the server starts, so a SIGTERM during start-up also exits.
    """

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, handler)
