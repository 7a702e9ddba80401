"""The general cache at cache_url: keyed text with a sliding expiry, in this process, in SQLite or in Redis.

Everything the proxy remembers across requests lives here, each user in a namespace and a backend of its own: the
notes (app.notes), the prompt-cache report (app.compaction.prefix), the expand rounds (app.expansion.memory) and
what was learned of each model (app.upstream.models).
"""

from __future__ import annotations

from pathlib import Path

from app.cache.base import Backend, CacheError
from app.cache.memory import MemoryBackend


def open_backend(url: str, *, ttl: float, max_entries: int) -> Backend:
    """memory://, sqlite:///path (sqlite://relative/path) or redis://host:port/db (rediss:// for TLS).

    Raises CacheError when the backend cannot be opened (a SQLite file that cannot be created). Redis connects
    on first use, so an unreachable Redis does not stop the proxy: its requests fall back until it is back.
    """
    scheme, _, rest = url.partition("://")
    if scheme == "memory":
        return MemoryBackend(ttl, max_entries)
    if scheme == "sqlite":
        from app.cache.sqlite import SqliteBackend

        return SqliteBackend(Path(rest), ttl)
    if scheme in ("redis", "rediss"):
        # Imported only when used, so memory:// and sqlite:// start without touching the redis package.
        from app.cache.redis import RedisBackend

        return RedisBackend(url, ttl)
    raise ValueError(f"unknown cache URL scheme {scheme!r}")


__all__ = ["Backend", "CacheError", "MemoryBackend", "open_backend"]
