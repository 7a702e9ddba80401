"""A bounded, supervised set of background tasks owned by the app: folds made ahead of need.

Created in the app's lifespan and closed there: closing cancels what is still running, so nothing outlives
the app. A job is a blocking function run in a worker thread; its failure is logged, never raised, since
nobody waits for it. Names keep the same job from running twice at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
import anyio.from_thread
import anyio.to_thread
from anyio.abc import TaskGroup

logger = logging.getLogger("compaction_proxy.background")


class Background:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running: set[str] = set()
        self._group: TaskGroup | None = None
        self._threads: anyio.CapacityLimiter | None = None

    async def start(self) -> None:
        """Enter the task group; called from the lifespan, which calls aclose() from the same task."""
        self._threads = anyio.CapacityLimiter(max(1, self.limit))
        self._group = anyio.create_task_group()
        await self._group.__aenter__()

    async def aclose(self) -> None:
        group, self._group = self._group, None
        if group is not None:
            group.cancel_scope.cancel()
            await group.__aexit__(None, None, None)

    def submit(self, name: str, job: Callable[[], None]) -> bool:
        """Start job unless one of that name runs, the set is full or closed. On the event loop's thread."""
        if self._group is None or name in self.running or len(self.running) >= self.limit:
            return False
        self.running.add(name)
        self._group.start_soon(self._run, name, job, name=f"background {name[:16]}")
        return True

    def submit_from_thread(self, name: str, job: Callable[[], None]) -> bool:
        """submit() from a worker thread (where the strategies run)."""
        return anyio.from_thread.run_sync(self.submit, name, job)

    async def _run(self, name: str, job: Callable[[], None]) -> None:
        try:
            # abandon_on_cancel: on shutdown the task ends at once; the thread's own call then fails as the
            # upstream client closes, and its result goes nowhere.
            await anyio.to_thread.run_sync(job, limiter=self._threads, abandon_on_cancel=True)
        except Exception as exc:
            # The job's own failures (a summariser that is down) are expected and already logged where they
            # happen; this keeps one failing job from taking the task group, and so the app, down.
            logger.warning("background job %s failed: %s", name[:16], exc)
        finally:
            self.running.discard(name)
