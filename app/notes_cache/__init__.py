"""Notes cache backends by COMPACTION_CACHE_URL, and the store the notes strategy uses on top of them."""

from __future__ import annotations

from pathlib import Path

from .base import Backend, CacheError
from .memory import MemoryBackend
from .store import NotesStore, Submit


def open_backend(url: str, *, ttl: float, max_entries: int) -> Backend:
    """memory://, sqlite:///path (sqlite://relative/path) or redis://host:port/db (rediss:// for TLS).

    Raises CacheError when the backend cannot be opened (a SQLite file that cannot be created). Redis connects
    on first use, so an unreachable Redis does not stop the proxy: its requests fall back until it is back.
    """
    scheme, _, rest = url.partition("://")
    if scheme == "memory":
        return MemoryBackend(ttl, max_entries)
    if scheme == "sqlite":
        from .sqlite import SqliteBackend

        return SqliteBackend(Path(rest), ttl)
    if scheme in ("redis", "rediss"):
        # Imported only when used, so memory:// and sqlite:// start without touching the redis package.
        from .redis import RedisBackend

        return RedisBackend(url, ttl)
    raise ValueError(f"unknown cache URL scheme {scheme!r}")


__all__ = ["Backend", "CacheError", "MemoryBackend", "NotesStore", "Submit", "open_backend"]
