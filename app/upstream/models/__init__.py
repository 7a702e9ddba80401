"""What the proxy knows of each model behind the upstream: its context window (configured, published by the
upstream, stated by the upstream's context-length errors, in the packaged table, or assumed) and how the
upstream's token counts compare with the proxy's own (calibration).

The window of a model is, in order: the operator's `models` entry; else what the upstream publishes
(metadata, asked once per process, only for a model the table does not know); else the packaged table; else
default_context_window, assumed (and said once in a warning). A window a context-length error stated caps
all of these: the upstream's refusal is the last word. Learned values are shared through `cache_url`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import anyio
import httpx

from app.cache import Backend
from app.upstream.models.metadata import Published, discover
from app.upstream.models.overflow import MAX_ERROR_BYTES, Overflow, parse_overflow
from app.upstream.models.store import Learned, LearnedStore
from strategies import ModelLimits, ModelTable

Source = Literal["configured", "learned", "published", "table", "assumed"]
# The wire formats whose upstream is upstream_base_url, which is asked what it publishes (the Anthropic API, of
# /v1/messages, publishes no windows).
PUBLISHING = frozenset({"chat.completions", "responses"})
# A failed metadata lookup (the upstream down, a key it refused) is tried again after this long, not per request.
DISCOVERY_RETRY_SECONDS = 60.0
# Models whose assumed window has been warned about, per process: past this many, no more warnings.
MAX_WARNED_MODELS = 1024
logger = logging.getLogger("compaction_proxy.model_limits")


@dataclass(frozen=True)
class Resolved:
    """A model's limits and calibration as resolved for one request, and what they were resolved for: the model,
    the wire format, whether the request opts into the model's longer window, the client (its scope, hex).
    """

    limits: ModelLimits
    source: Source
    calibration: float = 1.0  # upstream prompt tokens per counted token, for this client
    model: str = ""
    wire: str = ""
    extended: bool = False
    client: str = ""


class UpstreamModels:
    def __init__(
        self,
        table: ModelTable,
        configured: Mapping[str, ModelLimits],
        default: ModelLimits,
        *,
        store: LearnedStore | None,
        calibrate: bool,
    ) -> None:
        """table: the packaged table with the operator's entries (configured) in it; store: where learned values are
        kept (None: nothing is learned, nor published metadata asked for); calibrate: scale counts by the ratio.
        """
        self.table = table
        self.configured = frozenset(name.lower() for name in configured)
        self.default = default
        self.store = store
        self.calibrate = calibrate
        self.published: Published | None = None
        self._discovered_at: float | None = None  # of the last failed attempt
        self._discovery_lock = anyio.Lock()
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    @classmethod
    def build(
        cls,
        table: ModelTable,
        configured: Mapping[str, ModelLimits],
        default: ModelLimits,
        *,
        backend: Backend | None,
        upstream: str,
        max_models: int,
        calibrate: bool,
    ) -> UpstreamModels:
        store = LearnedStore(backend, upstream, max_models) if backend is not None else None
        return cls(table, configured, default, store=store, calibrate=calibrate)

    def resolve(self, model: str, wire: str, *, extended: bool = False, client: str = "") -> Resolved:
        """The model's limits and calibration for a request in `wire`'s format (extended: it opts into the model's
        longer window, ModelTable.lookup) from this client. Called from the compaction thread (cache I/O).
        """
        store = self.store
        learned = store.get(model, wire, extended=extended, client=client) if store is not None else Learned()
        found = self.table.find(model, extended)
        published = self.published.window(model) if self.published is not None and wire in PUBLISHING else None
        limits: ModelLimits
        source: Source
        if found is not None and found[0] in self.configured:
            limits, source = found[1], "configured"
        elif published is not None:
            max_output = found[1].max_output if found is not None else self.default.max_output
            limits, source = ModelLimits(context_window=published, max_output=max_output), "published"
        elif found is not None:
            limits, source = found[1], "table"
        else:
            limits, source = self.default, "assumed"
        if learned.window is not None and learned.window < limits.context_window:
            limits, source = ModelLimits(context_window=learned.window, max_output=limits.max_output), "learned"
        ratio = learned.ratio if self.calibrate else 1.0
        return Resolved(limits, source, ratio, model, wire, extended, client)

    def may_discover(self, wire: str) -> bool:
        """Whether asking the upstream of `wire`'s format what it publishes is still to come (or may be tried again)."""
        return wire in PUBLISHING and self._discovery_due()

    def _discovery_due(self) -> bool:
        if self.store is None or self.published is not None:
            return False
        last = self._discovered_at
        return last is None or time.monotonic() - last >= DISCOVERY_RETRY_SECONDS

    async def discover(self, client: httpx.AsyncClient, base_url: str, headers: list[tuple[bytes, bytes]]) -> bool:
        """Ask the upstream what it publishes, once per process (again after a failure, at most once a minute).
        True when it was asked now and answered, so the request may be compacted again with what it said.
        """
        if not self._discovery_due():
            return self.published is not None
        async with self._discovery_lock:
            if not self._discovery_due():
                return self.published is not None  # another request asked meanwhile
            now = time.monotonic()
            published = await discover(client, base_url, headers)
            if published is None:
                self._discovered_at = now
                return False
            self.published = published
            logger.info(
                "the upstream publishes context windows for %d models%s",
                len(published.windows),
                f" and serves one of {published.server_window} tokens" if published.server_window else "",
            )
            return True

    def warn_assumed(self, model: str) -> None:
        """The one warning for a model whose window is assumed: the first request of it, in this process."""
        with self._lock:
            if model in self._warned or len(self._warned) >= MAX_WARNED_MODELS:
                return
            self._warned.add(model)
        logger.warning(
            "model %r: context window unknown (not configured, not published by the upstream, not in the table); "
            'assuming %d tokens until the upstream says otherwise. Set --context-window or [models."%s"] to say it.',
            model,
            self.default.context_window,
            model,
            extra={"model": model, "assumed_context_window": self.default.context_window},
        )

    def learn_overflow(self, resolved: Resolved, overflow: Overflow, counted: int) -> int | None:
        """The upstream refused the request as too long: keep the window and the prompt size it stated (counted:
        the proxy's own uncalibrated count of what it sent). The window to fit the request to, if it stated one:
        the one kept, or the one stated where nothing more can be kept (the cache failed, or learned_models_max).
        """
        if self.store is None:
            return None
        model = resolved.model
        if overflow.prompt_tokens is not None and self.calibrate:
            self.store.observe(model, resolved.wire, resolved.client, counted, overflow.prompt_tokens)
        if overflow.limit is None:
            return None
        window = self.store.learn_window(model, resolved.wire, overflow.limit, extended=resolved.extended)
        logger.warning(
            "model %r: the upstream refused a prompt of %s tokens as over its context window of %d tokens; "
            "the window is learned",
            model,
            overflow.prompt_tokens if overflow.prompt_tokens is not None else "?",
            overflow.limit,
            extra={"model": model, "learned_context_window": overflow.limit},
        )
        return window

    def observe_usage(self, resolved: Resolved, counted: int, prompt_tokens: int) -> None:
        """The upstream's answer says how many prompt tokens it counted: this client's calibration learns from it."""
        if self.store is not None and self.calibrate:
            self.store.observe(resolved.model, resolved.wire, resolved.client, counted, prompt_tokens)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()


__all__ = ["MAX_ERROR_BYTES", "Overflow", "Published", "Resolved", "UpstreamModels", "parse_overflow"]
