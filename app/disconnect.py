"""Work for a request that stops when nobody waits for it any more.

Compaction runs in a worker thread that nothing can interrupt; it stops at its next checkpoint once its Deadline
is cancelled. This cancels it when the client disconnects while the work runs, and when the request itself is
cancelled (the server's shutdown past its grace period), so no thread goes on computing for nobody.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
from starlette.requests import Request

from strategies.deadline import Deadline

T = TypeVar("T")


async def unless_disconnected(request: Request, deadline: Deadline, work: Callable[[], Awaitable[T]]) -> T:
    """await work(), cancelling `deadline` if the client goes away meanwhile or this task is cancelled.
    The request's body must have been read: the next message the server sends is then the disconnect.
    """

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
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
