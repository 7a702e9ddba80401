"""The expand loop's SSE splitter on an event that never ends: the CPU it takes to hold one up to its limit.

An upstream (or anything posing as one) may stream a single event and never end it. The splitter must search each
byte once, however the chunks fall, until the event passes its limit and it gives up (EventTooLarge); a splitter
that searched its whole buffer again per chunk took seconds of CPU on the event loop for the same bytes. The
reference is what the plain relay does with those chunks: pass them on, no search.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from app.upstream.sse import EventSplitter, EventTooLarge

CHUNK_BYTES = 64 * 1024


@dataclass(frozen=True)
class Timing:
    fed: int  # bytes fed before the splitter gave up
    chunks: int
    splitter_seconds: float  # CPU, the best of the runs
    relay_seconds: float


def _never_ending(limit: int) -> Iterator[bytes]:
    """One `data:` event, CHUNK_BYTES at a time, one chunk past `limit` and no blank line anywhere."""
    head = b'data: {"choices":[{"delta":{"content":"'
    body = b"x" * CHUNK_BYTES
    yield head + body[len(head) :]
    for _ in range(limit // CHUNK_BYTES):
        yield body


def _split(limit: int) -> tuple[float, int, int]:
    splitter = EventSplitter(limit)
    fed = chunks = 0
    started = time.process_time()
    try:
        for chunk in _never_ending(limit):
            fed += len(chunk)
            chunks += 1
            if splitter.feed(chunk):
                raise AssertionError("an event that never ends was cut")
    except EventTooLarge:
        return time.process_time() - started, fed, chunks
    raise AssertionError(f"the splitter held {fed} bytes, past its limit of {limit}, without giving up")


def _relay(limit: int) -> float:
    started = time.process_time()
    passed = 0
    for chunk in _never_ending(limit):
        passed += len(chunk)  # what a relay does with a chunk it does not read: hand it on
    return time.process_time() - started


def time_splitter(limit: int, repeat: int) -> Timing:
    runs = [_split(limit) for _ in range(repeat)]
    _, fed, chunks = runs[0]
    relay = min(_relay(limit) for _ in range(repeat))
    return Timing(fed, chunks, min(seconds for seconds, _, _ in runs), relay)
