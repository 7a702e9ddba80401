"""Waiting for what a test waits for, not for a while: a condition on the real state checked until a deadline,
and where threads are (so a test can wait until the others are blocked at a known point, waiting on one).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any


def wait_for(condition: Callable[[], bool], timeout: float = 10, what: str = "the condition") -> None:
    """Until condition() holds; fails after `timeout` seconds. Checked every 10 ms: for state nothing signals."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(0.01)


def threads_in(*functions: Callable[..., Any]) -> int:
    """How many threads of this process are inside these functions, each called directly by the one before it:
    threads_in(NotesStore.fold, Future.result) counts the callers of fold that wait on another's fold (and not the
    one making it, which waits on futures deeper down).
    """
    codes = [function.__code__ for function in functions]
    count = 0
    for frame in sys._current_frames().values():
        stack = []
        while frame is not None:
            stack.append(frame.f_code)
            frame = frame.f_back  # type: ignore[assignment]
        stack.reverse()  # outermost first
        count += any(stack[i : i + len(codes)] == codes for i in range(len(stack)))
    return count
