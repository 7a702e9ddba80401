"""Whether the proxy should get new traffic: /readyz says yes only between start-up and shutdown."""

from __future__ import annotations


class Readiness:
    def __init__(self) -> None:
        self.started = False
        self.stopping = False

    @property
    def ready(self) -> bool:
        return self.started and not self.stopping

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        """Called as shutdown begins (see app.server.serve), before in-flight requests are drained."""
        self.stopping = True
