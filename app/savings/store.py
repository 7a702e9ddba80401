"""Where the savings ledger is kept, by cache_url as the general cache (app.cache): memory:// in this process,
sqlite:///path in a file (it survives a restart; the workers of one host add up in it), redis://host:port/db (every
replica adds up in it). Each adds a tally with atomic increments, so processes that share a store never lose each
other's counts, and admits at most `limit` distinct models between all of them.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

from app.cache import CacheError
from app.savings.tally import Tally


class Store(Protocol):
    """Synchronous and thread-safe; failures raise CacheError."""

    name: str  # memory, sqlite or redis: what /savings says the figures are kept in

    def admit(self, model: str, limit: int) -> bool:
        """Whether the model is, or now becomes, one of the at most `limit` models kept apart."""
        ...

    def admitted(self) -> set[str]:
        """Every model admitted so far (once `limit` are, the set no longer changes)."""
        ...

    def add(self, tally: Tally, oldest_minute: int) -> None:
        """Add the tally's counts, keep the smaller window, and forget minutes before oldest_minute."""
        ...

    def read(self, oldest_minute: int) -> Tally:
        """Everything kept, the series from oldest_minute on."""
        ...

    def close(self) -> None: ...


class MemoryStore:
    """This process's counts: lost on restart, not shared."""

    name = "memory"

    def __init__(self) -> None:
        self._tally = Tally()
        self._models: set[str] = set()
        self._oldest = 0  # the series holds no minute before this
        self._lock = threading.Lock()

    def admit(self, model: str, limit: int) -> bool:
        with self._lock:
            if model not in self._models and len(self._models) < limit:
                self._models.add(model)
            return model in self._models

    def admitted(self) -> set[str]:
        with self._lock:
            return set(self._models)

    def add(self, tally: Tally, oldest_minute: int) -> None:
        with self._lock:
            self._tally.merge(tally, oldest_minute=oldest_minute)
            if oldest_minute > self._oldest:  # once a minute: the series is scanned
                self._oldest = oldest_minute
                series = self._tally.series
                for key in [key for key in series if key[0] < oldest_minute]:
                    del series[key]

    def read(self, oldest_minute: int) -> Tally:
        with self._lock:
            out = Tally()
            out.merge(self._tally, oldest_minute=oldest_minute)
            return out

    def close(self) -> None:
        pass


def open_store(url: str) -> Store:
    """The store at cache_url (validated by Settings). Raises CacheError when a SQLite file cannot be opened; Redis
    connects on first use, so an unreachable one does not stop the proxy.
    """
    scheme, _, rest = url.partition("://")
    if scheme == "memory":
        return MemoryStore()
    if scheme == "sqlite":
        from app.savings.sqlite import SqliteStore

        return SqliteStore(Path(rest))
    if scheme in ("redis", "rediss"):
        from app.savings.redis import RedisStore

        return RedisStore(url)
    raise CacheError(f"unknown cache URL scheme {scheme!r}")
