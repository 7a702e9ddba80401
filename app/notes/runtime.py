"""Everything the notes strategy gets from the app, built once per app in create_app: the notes cache
(COMPACTION_CACHE_URL) with single flight, the summariser on the pooled upstream client, and the background
task set that makes folds ahead of need.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import anyio.to_thread
import httpx

from app.cache import CacheError, open_backend
from app.edge.headers import RawHeaders
from app.notes.background import Background
from app.notes.store import NotesStore
from app.notes.summariser import Summarisers
from app.policy.keys import Keys
from app.settings import Settings
from strategies import ModelTable, NotesCache, Summariser
from strategies.context import Deadline

logger = logging.getLogger("compaction_proxy.notes")
# Over one summariser call's timeout, so that a live holder never loses the lock mid-call.
LOCK_MARGIN_SECONDS = 5.0


@dataclass(frozen=True)
class NotesTools:
    """What one request's Context carries for the notes strategy."""

    summariser: Summariser
    cache: NotesCache


@dataclass(frozen=True)
class ScopedNotes:
    """The notes store as one client sees it: its keys under the client's scope (Keys.client_scope), so no client
    reads notes another made, nor learns from a cache hit what another's conversation said.
    """

    store: NotesStore
    scope: str  # hex; "" for anonymous clients

    def _key(self, key: str) -> str:
        return f"{self.scope}:{key}" if self.scope else key

    def get(self, key: str) -> str | None:
        return self.store.get(self._key(key))

    def fold(self, key: str, make: Callable[[], str]) -> str:
        return self.store.fold(self._key(key), make)

    def fold_ahead(self, key: str, job: Callable[[], None]) -> bool:
        return self.store.fold_ahead(self._key(key), job)


class NotesRuntime:
    def __init__(self, store: NotesStore, background: Background, summarisers: Summarisers) -> None:
        self.store = store
        self.background = background
        self.summarisers = summarisers
        self.cache_url = ""

    @classmethod
    def build(
        cls,
        settings: Settings,
        keys: Keys,
        models: ModelTable,
        client: httpx.AsyncClient,
        record: Callable[[str], None] = lambda outcome: None,
    ) -> NotesRuntime:
        """Raises CacheError when the cache cannot be opened (a SQLite file that cannot be created). A Redis that
        cannot be reached is not fatal: notes fall back (notes_cache_error) until it is (see start).
        record: counts each summariser call by its outcome (Metrics.summariser_call).
        """
        ttl, size = settings.cache_ttl_seconds, settings.cache_max_entries
        backend = open_backend(settings.cache_url, ttl=ttl, max_entries=size)
        background = Background(settings.notes_ahead_max)
        store = NotesStore(
            backend,
            lock_seconds=settings.summariser_timeout + LOCK_MARGIN_SECONDS,
            submit=background.submit_from_thread if settings.notes_ahead_max > 0 else None,
        )
        runtime = cls(store, background, Summarisers(settings, keys, models, client, record))
        runtime.cache_url = settings.cache_url
        return runtime

    async def start(self) -> None:
        """Start the task set that makes folds ahead of need (in the lifespan), and say if the cache is down."""
        await self.background.start()
        ping = getattr(self.store.backend, "ping", None)
        if ping is not None:
            try:
                await anyio.to_thread.run_sync(ping)
            except CacheError as exc:
                # Only the host: the URL may hold a password.
                logger.warning("notes cache %s is not reachable yet: %s", self.cache_url.split("@")[-1], exc)

    def for_request(self, headers: RawHeaders, deadline: Deadline, scope: bytes) -> NotesTools:
        return NotesTools(self.summarisers.for_request(headers, deadline), ScopedNotes(self.store, scope.hex()))

    async def aclose(self) -> None:
        await self.background.aclose()
        await anyio.to_thread.run_sync(self.store.close)
