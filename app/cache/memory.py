"""memory://: a bounded LRU in this process. Lost on restart, not shared: one process, or a test."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict


class MemoryBackend:
    def __init__(self, ttl: float, max_entries: int) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[float, str]] = OrderedDict()  # key -> (expires, value)
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] <= now:
                del self._entries[key]
                return None
            self._entries[key] = (now + self.ttl, entry[1])
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: str, value: str) -> None:
        with self._lock:
            self._entries[key] = (time.monotonic() + self.ttl, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def acquire(self, key: str, token: str, seconds: float) -> bool:
        # One process: NotesStore's in-process single flight is already the whole lock.
        return True

    def release(self, key: str, token: str) -> None:
        pass

    def close(self) -> None:
        with self._lock:
            self._entries.clear()
