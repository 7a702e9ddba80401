"""When a request's compaction must stop: its deadline passed, its client went away, or the proxy is stopping.

Strategies run in a worker thread, which nothing can interrupt from outside; they call Context.checkpoint()
in their loops, which raises CompactionStopped once the Deadline says so. Cheap enough for every loop: the
clock is read once every CLOCK_EVERY calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

CLOCK_EVERY = 64
Reason = Literal["deadline", "cancelled"]


class CompactionStopped(Exception):
    """Raised from a checkpoint: `deadline` (the request goes on uncompacted) or `cancelled` (nobody waits)."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(reason)
        self.reason: Reason = reason


class Deadline:
    def __init__(self, seconds: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        """seconds: from now; None: no deadline, only cancel() stops the work."""
        self.clock = clock
        self.at = clock() + seconds if seconds is not None else None
        self.cancelled = self.finished = False
        self._calls = 0
        self._on_cancel: list[Callable[[], None]] = []

    def remaining(self) -> float | None:
        return None if self.at is None else max(0.0, self.at - self.clock())

    def finish(self) -> None:
        """The request's compaction is over: what it started in the background (notes made ahead of need) is
        bounded by its own timeouts from now on, not by this deadline.
        """
        self.at = None
        self._on_cancel = []
        self.finished = True

    def expired(self) -> bool:
        return self.at is not None and self.clock() >= self.at

    def cancel(self) -> None:
        """Stop the work at its next checkpoint, and run what was registered (e.g. cancel a pending call)."""
        if self.finished:
            return
        self.cancelled = True
        callbacks, self._on_cancel = self._on_cancel, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run callback on cancel() (at once if cancelled already); returns a function that unregisters it."""
        if self.cancelled:
            callback()
        elif not self.finished:
            self._on_cancel.append(callback)

        def forget() -> None:
            if callback in self._on_cancel:
                self._on_cancel.remove(callback)

        return forget

    def check(self) -> None:
        if self.cancelled:
            raise CompactionStopped("cancelled")
        self._calls += 1
        if self._calls % CLOCK_EVERY == 0 and self.expired():
            raise CompactionStopped("deadline")
