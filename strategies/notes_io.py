"""What the notes strategy needs from outside, reached through the Context: a summariser and a notes cache.

Both are synchronous on purpose: strategies run in a worker thread, off the event loop, and the app's
implementations bridge from there to its pooled HTTP client and its cache backends. Keeping them behind
these protocols is what keeps strategies/ free of httpx, Redis and the app.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .messages import Message
from .unavailable import Unavailable

# Why notes could not be had; each is also the X-Compaction-Fallback value a response carries.
SUMMARISER_ERROR = "summariser_error"  # the call failed: HTTP error status, unreachable, unreadable answer
SUMMARISER_TIMEOUT = "summariser_timeout"
SUMMARISER_EMPTY = "summariser_empty"  # answered, but with no notes
NO_SUMMARISER = "no_summariser"  # nothing in the Context to summarise with (e.g. a library user's bare Context)
NOTES_CACHE_ERROR = "notes_cache_error"  # the cache backend failed (Redis down, disk full, ...)
NOTES_BUSY = "notes_busy"  # another request or replica held the fold longer than the bounded wait
SUMMARISER_LIMIT = "summariser_limit"  # the request has made as many summariser calls as it may


class NotesUnavailable(Unavailable):
    """The notes cannot be made or read right now: the chain runs the notes strategy's fallback chain."""


class Summariser(Protocol):
    """Turns a short list of chat messages into the new notes (one non-streaming chat completion)."""

    @property
    def default_model(self) -> str | None:
        """The model notes are made with when the strategy names none; None: the request's own model."""
        ...

    def context_window(self, model: str) -> int:
        """Tokens the model reads and writes in one call, so that a fold can be split to fit."""
        ...

    def summarise(self, messages: list[Message], model: str) -> str:
        """The answer's text. Raises NotesUnavailable on any failure, an empty answer included."""
        ...


class NotesCache(Protocol):
    """Notes by content address (see notes_fold.fold_key), shared by every request and, with a shared
    backend, by every replica.
    """

    def get(self, key: str) -> str | None:
        """The notes stored under key, or None. Raises NotesUnavailable when the backend fails."""
        ...

    def fold(self, key: str, make: Callable[[], str]) -> str:
        """The notes under key; if absent, make() them once (concurrent callers for the same key wait for that
        one call) and store them. A make() that raises stores nothing and raises to every waiter.
        """
        ...

    def fold_ahead(self, key: str, job: Callable[[], None]) -> bool:
        """Run job (which folds up to key) in the background unless it is already running or there is no
        room. Never blocks on the job and never raises for it; True if it was started.
        """
        ...
