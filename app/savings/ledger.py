"""The savings ledger: what the proxy counts of each compacted request, per wire format and model, kept in the store at
cache_url. Each count is made once, here, for both /metrics and the ledger, so the savings page's totals are the
Prometheus counters' (over the store's life rather than the process's).

Counting never waits on the store: a request adds to a tally in this process, which is added to the store every
FLUSH_SECONDS (and before /savings reads it). A store that fails is logged, counted in
compaction_proxy_savings_store_errors, and its tally kept to be added next time; no request ever fails for it.

Model names are the client's: the first max_models the store takes (between all processes that share it) are kept
apart, any other is counted as "other", so neither the store nor this process grows with names a client invents.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from app.cache import CacheError
from app.savings.store import Store
from app.savings.tally import (
    BUCKET_SECONDS,
    COUNTED,
    EXPAND_CALL,
    EXPAND_ROUND,
    FALLBACK,
    MAX_REASONS,
    OTHER,
    REQUESTS,
    TOKENS_AFTER,
    TOKENS_BEFORE,
    USAGE_REPORTED,
    Tally,
    minute_of,
    model_name,
)
from app.upstream.models.usage import InputUsage

if TYPE_CHECKING:
    from app.compaction.compactor import Compacted
    from app.edge.metrics import Metrics

FLUSH_SECONDS = 1.0
logger = logging.getLogger("compaction_proxy.savings")


class Ledger:
    def __init__(
        self,
        store: Store,
        metrics: Metrics,
        *,
        max_models: int,
        history_minutes: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.max_models = max_models
        self.history_minutes = history_minutes
        self.clock = clock
        self._pending = Tally()
        self._lock = threading.Lock()  # the pending tally and the names: counted from the loop and from threads
        self._flushing = threading.Lock()  # one flush at a time
        self._admitted: set[str] = set()  # taken by the store: at most max_models
        self._full = False  # the store took max_models: _admitted is all of them, and no other is asked about
        # In the pending tally, not yet put to the store: at most max_models, in the order they came (first come, first
        # admitted).
        self._unknown: dict[str, None] = {}
        self._reasons: set[str] = set()
        self._failing = False

    # --- counting (what the request path calls) ------------------------------------------------------------

    def compacted(self, compacted: Compacted, wire: str) -> None:
        """A request through a compacted route, as it goes upstream (after its one retry, if any)."""
        self.metrics.compacted(compacted, wire)
        result = compacted.result
        with self._lock:
            model, minute, tally = self._model(compacted.model), self._minute(), self._pending
            tally.add(wire, model, REQUESTS, 1, minute)
            if compacted.counted:
                tally.add(wire, model, COUNTED, 1)
                tally.add(wire, model, TOKENS_BEFORE, result.tokens_before, minute)
                tally.add(wire, model, TOKENS_AFTER, result.tokens_after, minute)
            if compacted.fallback:
                tally.add(wire, model, FALLBACK + self._reason(compacted.fallback), 1)

    def usage(self, wire: str, model: str, usage: InputUsage) -> None:
        """An upstream answer's reported input (each expand round's apart)."""
        self.metrics.upstream_input(wire, usage)
        with self._lock:
            name, minute, tally = self._model(model), self._minute(), self._pending
            tally.add(wire, name, USAGE_REPORTED, 1)
            for kind, count in usage.by_kind().items():
                tally.add(wire, name, kind, count, minute)

    def expand_round(self, wire: str, model: str, outcome: str) -> None:
        self.metrics.expand_rounds.labels(outcome).inc()
        with self._lock:
            self._pending.add(wire, self._model(model), EXPAND_ROUND + outcome, 1)

    def expand_calls(self, wire: str, model: str, outcome: str, count: int) -> None:
        self.metrics.expand_calls.labels(outcome).inc(count)
        with self._lock:
            self._pending.add(wire, self._model(model), EXPAND_CALL + outcome, count)

    def learned_window(self, wire: str, model: str, window: int) -> None:
        """The upstream stated the model's window in a refusal (app.upstream.models keeps it, by digest only)."""
        with self._lock:
            name = self._model(model)
            if name != OTHER:
                self._pending.window(wire, name, window)

    def _model(self, model: str) -> str:
        name = model_name(model)
        if name in self._admitted or name in self._unknown:
            return name
        if self._full or len(self._admitted) >= self.max_models:
            return OTHER  # all the store takes are known here: it takes no more
        if len(self._unknown) >= self.max_models:
            return OTHER  # however many new names come between two flushes, the tally holds at most max_models
        self._unknown[name] = None
        return name

    def _reason(self, reason: str) -> str:
        if reason in self._reasons:
            return reason
        if len(self._reasons) >= MAX_REASONS:
            return OTHER
        self._reasons.add(reason)
        return reason

    def _minute(self) -> int:
        return minute_of(self.clock())

    def oldest_minute(self) -> int:
        return self._minute() - (self.history_minutes - 1) * BUCKET_SECONDS

    # --- keeping (in the background, and before a read) ----------------------------------------------------

    def flush(self) -> None:
        """The pending tally added to the store (blocking: in a thread unless the store is memory)."""
        with self._flushing:
            with self._lock:
                tally, self._pending = self._pending, Tally()
                unknown, self._unknown = self._unknown, {}
            if not tally:
                return
            try:
                refused = {model for model in unknown if not self._admit(model)}
            except CacheError as exc:
                self._failed(exc, tally, unknown)  # asked again next time
                return
            kept = tally.renamed(refused, OTHER) if refused else tally
            try:
                self.store.add(kept, self.oldest_minute())
            except CacheError as exc:
                self._failed(exc, kept, {model: None for model in unknown if model not in refused})
                return
            if self._failing:
                self._failing = False
                logger.info("the savings store works again")

    def _admit(self, model: str) -> bool:
        if self._full:
            return model in self._admitted
        admitted = self.store.admit(model, self.max_models)
        # A refusal means the store is full for good: what it holds (other processes' models too) is read once.
        every = None if admitted else self.store.admitted()
        with self._lock:
            if admitted:
                self._admitted.add(model)
            if every is not None:
                self._admitted, self._full = every, True
        return admitted

    def _failed(self, exc: CacheError, tally: Tally, unknown: dict[str, None]) -> None:
        self.metrics.savings_store_errors.inc()
        if not self._failing:  # once per outage, not once a second
            self._failing = True
            logger.warning(
                "the savings store (%s) failed: %s; its counts are kept here and added when it works again",
                self.store.name,
                type(exc).__name__,
            )
        with self._lock:
            # Back where they were, with what was counted meanwhile: still bounded, by the same names and minutes.
            kept, oldest = Tally(), self.oldest_minute()
            kept.merge(tally, oldest_minute=oldest)
            kept.merge(self._pending, oldest_minute=oldest)
            self._pending = kept
            self._unknown = {**{m: None for m in unknown if m not in self._admitted}, **self._unknown}

    def read(self) -> Tally:
        """Everything the store holds, this process's pending counts added first. Raises CacheError."""
        self.flush()
        return self.store.read(self.oldest_minute())

    async def run(self) -> None:
        """Flush every FLUSH_SECONDS until cancelled (the lifespan's task group), then once more."""
        try:
            while True:
                await anyio.sleep(FLUSH_SECONDS)
                await self._flush_async()
        finally:
            with anyio.CancelScope(shield=True):
                await self._flush_async()

    async def _flush_async(self) -> None:
        if self.store.name == "memory":
            self.flush()  # a dictionary update: a thread hop would cost more
        else:
            await anyio.to_thread.run_sync(self.flush)

    async def read_async(self) -> Tally:
        if self.store.name == "memory":
            return self.read()
        return await anyio.to_thread.run_sync(self.read)

    def close(self) -> None:
        self.store.close()
