"""The NotesCache the notes strategy sees: a backend plus single flight, so that concurrent requests needing
the same fold make one summariser call, and folds started ahead of need on the app's background task set.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future

from app.cache.base import Backend, CacheError
from strategies.notes_io import NOTES_BUSY, NOTES_CACHE_ERROR, NotesUnavailable

logger = logging.getLogger("compaction_proxy.notes")
POLL_SECONDS = 0.05

# Starts a job in the background under a name; False if it was not started (already running, no room).
Submit = Callable[[str, Callable[[], None]], bool]


class NotesStore:
    """lock_seconds: how long one fold (one summariser call) may hold the cross-process lock; a holder that died
    frees it then. Waiters wait that long, plus a little, before giving up with notes_busy.
    """

    def __init__(self, backend: Backend, *, lock_seconds: float, submit: Submit | None = None) -> None:
        self.backend = backend
        self.lock_seconds = lock_seconds
        self.wait_seconds = lock_seconds + 1.0
        self.submit = submit
        self._inflight: dict[str, Future[str]] = {}
        self._mutex = threading.Lock()

    def get(self, key: str) -> str | None:
        try:
            return self.backend.get(key)
        except CacheError as exc:
            logger.warning("notes cache read failed: %s", exc)
            raise NotesUnavailable(NOTES_CACHE_ERROR, str(exc)) from None

    def fold(self, key: str, make: Callable[[], str]) -> str:
        with self._mutex:
            flight = self._inflight.get(key)
            leader = flight is None
            if flight is None:
                flight = self._inflight[key] = Future()
        if not leader:
            try:
                # The leader's outcome, failures included: ten requests behind a failing summariser fall back
                # together after one call, rather than each trying in turn.
                # Bounded, yet longer than the leader can take: its wait for another process plus its own fold.
                return flight.result(timeout=3 * self.wait_seconds)
            except TimeoutError:
                raise NotesUnavailable(NOTES_BUSY, f"no notes after {3 * self.wait_seconds:g} s") from None
        try:
            notes = self._fold_locked(key, make)
        except BaseException as exc:
            flight.set_exception(exc)
            raise
        else:
            flight.set_result(notes)
            return notes
        finally:
            with self._mutex:
                del self._inflight[key]

    def _fold_locked(self, key: str, make: Callable[[], str]) -> str:
        """Under the backend's lock, so that other processes sharing the backend wait for this fold too."""
        token = uuid.uuid4().hex
        deadline = time.monotonic() + self.wait_seconds
        while True:
            notes = self.get(key)
            if notes is not None:
                return notes
            if self._acquire(key, token):
                break
            if time.monotonic() > deadline:
                raise NotesUnavailable(NOTES_BUSY, f"another process held the fold over {self.wait_seconds:g} s")
            time.sleep(POLL_SECONDS)
        try:
            # Checked again under the lock: another process may have stored it just before we took the lock.
            notes = self.get(key)
            if notes is not None:
                return notes
            notes = make()
            try:
                self.backend.put(key, notes)
            except CacheError as exc:
                # The notes are good for this request; the next one will make them again.
                logger.warning("notes cache write failed: %s", exc)
            return notes
        finally:
            try:
                self.backend.release(key, token)
            except CacheError as exc:
                logger.warning("notes cache lock release failed (it expires by itself): %s", exc)

    def _acquire(self, key: str, token: str) -> bool:
        try:
            return self.backend.acquire(key, token, self.lock_seconds)
        except CacheError as exc:
            logger.warning("notes cache lock failed: %s", exc)
            raise NotesUnavailable(NOTES_CACHE_ERROR, str(exc)) from None

    def fold_ahead(self, key: str, job: Callable[[], None]) -> bool:
        if self.submit is None:
            return False
        return self.submit(key, job)

    def close(self) -> None:
        self.backend.close()
