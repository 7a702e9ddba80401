"""Where compaction work runs: worker threads in two lanes, so a few huge requests cannot starve small ones.

Compacting costs CPU in proportion to the body (strategies/ keeps it near-linear), and runs in worker threads
to keep the event loop free. A body of at least `large_request_bytes` goes to the large lane, a few threads
whose queue is bounded in bytes: past it the request is refused at once (503, Retry-After) rather than held in
memory. Every other body goes to the small lane, which large requests never occupy. Waiting counts against the
request's compaction deadline like the work itself.

A thread cannot be interrupted from outside: the work stops at its next checkpoint once its Deadline is cancelled,
which unless_disconnected does when the client disconnects while the work runs, or when the request itself is
cancelled (the server's shutdown past its grace period), so no thread goes on computing for nobody.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import anyio.to_thread
from starlette.requests import Request

from app.edge.errors import ApiError
from app.settings import Settings
from strategies.context import CompactionStopped, Deadline

T = TypeVar("T")
RETRY_AFTER_SECONDS = 1


class Lane:
    def __init__(self, name: str, threads: int, queue_bytes: int | None) -> None:
        """queue_bytes: bytes of bodies that may wait for a thread; None: no bound."""
        self.name = name
        self.threads = threads
        self.queue_bytes = queue_bytes
        self.running = self.waiting = self.waiting_bytes = 0
        self.limiter = anyio.CapacityLimiter(threads)
        # The lane's own limiter bounds its threads: anyio's default one (40 threads, shared by everything
        # that runs in a thread) must not put a second queue in front of them.
        self._thread_tokens = anyio.CapacityLimiter(threads)  # as many as the lane: never makes anyone wait

    def full(self, size: int = 1) -> bool:
        """Whether a body of `size` bytes would have to wait past the queue's bound."""
        busy = self.running + self.waiting >= self.threads
        return self.queue_bytes is not None and busy and self.waiting_bytes + size > self.queue_bytes

    def stats(self) -> dict[str, int | None]:
        return {
            "threads": self.threads,
            "running": self.running,
            "waiting": self.waiting,
            "waiting_bytes": self.waiting_bytes,
            "queue_bytes": self.queue_bytes,
        }

    async def run(self, work: Callable[[], T], size: int, deadline: Deadline) -> T:
        """work() in one of the lane's threads, for a body of `size` bytes. Raises a 503 ApiError when the queue
        is full, and CompactionStopped("deadline") when the deadline passes before a thread is free.
        """
        if self.full(size):
            raise ApiError(
                503,
                f"The proxy is compacting as many large requests as it is configured to ({self.name} lane full); "
                "retry shortly.",
                type="server_error",
                code="compaction_busy",
                headers={"retry-after": str(RETRY_AFTER_SECONDS)},
            )
        self.waiting += 1
        self.waiting_bytes += size
        waited = False
        try:
            remaining = deadline.remaining()
            with anyio.move_on_after(remaining if remaining is not None else float("inf")):
                await self.limiter.acquire()
                waited = True
        finally:
            self.waiting -= 1
            self.waiting_bytes -= size
        if not waited:
            raise CompactionStopped("deadline")
        self.running += 1
        try:
            # abandon_on_cancel: a cancelled request (client gone, shutdown past its grace) returns at once;
            # the thread stops at its next checkpoint, since the caller then cancels the deadline.
            return await anyio.to_thread.run_sync(work, abandon_on_cancel=True, limiter=self._thread_tokens)
        finally:
            self.running -= 1
            self.limiter.release()


class Lanes:
    def __init__(self, settings: Settings) -> None:
        self.large_bytes = settings.large_request_bytes
        self.small = Lane("small", settings.compaction_threads, None)
        self.large = Lane("large", settings.large_compaction_threads, settings.large_compaction_queue_bytes)

    def for_body(self, size: int) -> Lane:
        return self.large if size >= self.large_bytes else self.small

    @property
    def saturated(self) -> bool:
        """A large request arriving now would be refused."""
        return self.large.full(self.large_bytes)

    def stats(self) -> dict[str, dict[str, int | None]]:
        return {"small": self.small.stats(), "large": self.large.stats()}


async def disconnected(request: Request) -> None:
    """Return once the client has gone away. The request's body must have been read: the next message the server
    sends is then the disconnect.
    """
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(request: Request, deadline: Deadline, work: Callable[[], Awaitable[T]]) -> T:
    """await work(), cancelling `deadline` if the client goes away meanwhile (disconnected) or this task is
    cancelled.
    """

    async def watch() -> None:
        await disconnected(request)
        deadline.cancel()

    error: Exception | None = None
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            try:
                value = await work()
            except Exception as exc:  # raised below as itself, not wrapped in the task group's ExceptionGroup
                error = exc
            finally:
                group.cancel_scope.cancel()
    except anyio.get_cancelled_exc_class():
        deadline.cancel()
        raise
    if error is not None:
        raise error
    return value
