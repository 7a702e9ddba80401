"""The uvicorn server the CLI runs: on SIGTERM or SIGINT it stops accepting, marks the app not ready and
drains in-flight requests (streams included) for up to shutdown_grace_seconds before cutting them.
"""

from __future__ import annotations

import logging
import signal
import socket
from types import FrameType

import uvicorn

from .readiness import Readiness

logger = logging.getLogger("compaction_proxy.server")


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
