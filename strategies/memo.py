"""Results of pure functions of content, remembered across requests.

An agent re-sends its whole history on every request; a strategy whose per-message work is a pure
function of the text (minify) then redoes megabytes of identical work each time. The app owns one Memo and
hands it to strategies through the Context.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

# What an entry costs besides its value, in characters: many tiny values (epochs' jump points) must not
# grow the memo without bound.
ENTRY_OVERHEAD = 64


class Memo:
    """A thread-safe LRU of strings bounded by the characters it holds (keys are short digests), each entry
    charged ENTRY_OVERHEAD characters on top of its value.
    """

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self._entries: OrderedDict[bytes, str] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get_or_compute(self, key: bytes, compute: Callable[[], str]) -> str:
        found = self.get(key)
        if found is not None:
            return found
        # Computed outside the lock: two threads may both compute a new key, which costs time, not correctness.
        value = compute()
        self.put(key, value)
        return value

    def get(self, key: bytes) -> str | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: bytes, value: str) -> None:
        cost = len(value) + ENTRY_OVERHEAD
        if cost > self.max_chars:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._chars -= len(old) + ENTRY_OVERHEAD
            self._entries[key] = value
            self._chars += cost
            while self._chars > self.max_chars:
                _, evicted = self._entries.popitem(last=False)
                self._chars -= len(evicted) + ENTRY_OVERHEAD
