"""The contract of a cache backend: keyed text with a sliding expiry, and a lock for single flight."""

from __future__ import annotations

from typing import Protocol


class CacheError(Exception):
    """The backend failed (unreachable, refused, disk full). Raised by backends instead of their own errors."""


class Backend(Protocol):
    """Synchronous, called from worker threads; implementations are thread-safe.

    Keys are content addresses (hex digests, each user's under its own prefix); values are text (notes, a prefix
    digest, expand rounds, what was learned of a model). Expiry is sliding: an entry read is kept another ttl, so a
    conversation in use keeps its newest entries however long it runs.
    """

    def get(self, key: str) -> str | None: ...

    def put(self, key: str, value: str) -> None: ...

    def acquire(self, key: str, token: str, seconds: float) -> bool:
        """Take the fold lock for key, shared with other processes where the backend is, for at most `seconds`
        (a holder that dies frees it then). False while someone else holds it.
        """
        ...

    def release(self, key: str, token: str) -> None:
        """Free the lock if `token` still holds it (it may have expired and been taken by someone else)."""
        ...

    def close(self) -> None: ...
