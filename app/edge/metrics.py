"""Prometheus metrics: one registry per app (created in create_app, never the process-global one), and
the pure-ASGI middleware that counts and times every request by route and status.

With several worker processes (`--workers`), prometheus_client keeps each process's values in files in
PROMETHEUS_MULTIPROC_DIR, which it reads once, when it is first imported; /metrics then adds up the files
of every worker, so whichever worker answers a scrape reports the whole proxy.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.compaction.prefix import OUTCOMES
from app.upstream.models.usage import KINDS
from app.wire import WIRE_NAMES

if TYPE_CHECKING:
    from app.compaction.compactor import Compacted
    from app.upstream.models.usage import InputUsage

# Streams of long answers run for minutes; the default buckets stop at 10 s.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
STRATEGY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
UPSTREAM_ERROR_KINDS = ("unreachable", "timeout", "broken_stream")
UNMATCHED = "unmatched"  # not the raw path: arbitrary paths would make unbounded label values
MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
# What an expand call the proxy answered got (app.expansion.allowance.Answered's counts).
EXPAND_CALL_OUTCOMES = ("resolved", "unresolved", "refused", "repeated", "left_out")


class Metrics:
    def __init__(self, multiprocess_dir: str | None = None) -> None:
        """multiprocess_dir: where all worker processes keep their values (PROMETHEUS_MULTIPROC_DIR, set before
        prometheus_client was imported); exposition then adds them all up. None: this process's values only.
        """
        self.multiprocess_dir = multiprocess_dir
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "compaction_proxy_requests", "Requests answered, by route and status.", ["route", "status"], registry=r
        )
        self.duration = Histogram(
            "compaction_proxy_request_duration_seconds",
            "Time from the request's arrival to the end of the response (the whole stream), by route.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.response_start = Histogram(
            "compaction_proxy_response_start_seconds",
            "Time from the request's arrival to the response's status and headers, by route.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "compaction_proxy_prompt_tokens",
            "Prompt tokens of compacted requests before and after compaction (stage=before|after), by wire format "
            "(wire=chat.completions|responses|messages).",
            ["wire", "stage"],
            registry=r,
        )
        self.strategy_time = Histogram(
            "compaction_proxy_strategy_seconds",
            "Time each strategy took on a compacted request (any wire format), by strategy.",
            ["strategy"],
            buckets=STRATEGY_BUCKETS,
            registry=r,
        )
        self.upstream_errors = Counter(
            "compaction_proxy_upstream_errors",
            "Upstream failures, by kind: unreachable, timeout, broken_stream.",
            ["kind"],
            registry=r,
        )
        self.fallbacks = Counter(
            "compaction_proxy_fallbacks",
            "Compacted requests (any wire format) whose chain did not run to its end, by reason: forwarded "
            "uncompacted (strategy_error, compaction_deadline), or compacted by a step's fallback chain (notes': "
            "summariser_error, summariser_timeout, ...; mask's where the expand tool cannot be offered: "
            "not_expandable).",
            ["reason"],
            registry=r,
        )
        self.summariser_calls = Counter(
            "compaction_proxy_summariser_calls",
            "Calls the notes strategy made to its summariser, by outcome: ok, error, timeout.",
            ["outcome"],
            registry=r,
        )
        self.prefix = Counter(
            "compaction_proxy_prefix",
            "Compacted requests (any wire format) by what the forwarded request did to the provider's prompt cache "
            "(X-Compaction-Prefix): new conversation, extends the previous request's prefix, breaks it, unknown (the "
            "cache failed).",
            ["outcome"],
            registry=r,
        )
        self.expand_rounds = Counter(
            "compaction_proxy_expand_rounds",
            "Rounds of the expand tool, by outcome: answered (the proxy answered the calls and asked again), capped "
            "(expand_max_rounds reached: asked once more without the tool), dropped (made beside the client's own "
            "calls, which went to the client alone).",
            ["outcome"],
            registry=r,
        )
        self.expand_calls = Counter(
            "compaction_proxy_expand_calls",
            "Calls of the expand tool the model made, by result: resolved (answered with the original), unresolved "
            "(a tool error: bad arguments, or a ref the request does not hold), refused (a tool error: past "
            "expand_max_request_chars or the model's window), repeated (answered already in this request: a "
            "pointer), left_out (past expand_max_calls in one round, or the same call twice in it: not answered).",
            ["result"],
            registry=r,
        )
        self.tokens_removed = Counter(
            "compaction_proxy_tokens_removed",
            "Prompt tokens compaction removed from compacted requests (before - after, never below 0 per request), by "
            "wire format.",
            ["wire"],
            registry=r,
        )
        self.upstream_input_tokens = Counter(
            "compaction_proxy_upstream_input_tokens",
            "Input tokens the upstream's answers to compacted requests reported (their usage; every expand round's), "
            "by wire format and kind: uncached, cache_read (served by the provider's prompt cache), cache_write "
            "(written to it: Anthropic's cache_creation_input_tokens).",
            ["wire", "kind"],
            registry=r,
        )
        self.savings_store_errors = Counter(
            "compaction_proxy_savings_store_errors",
            "Failed attempts to add the savings ledger's counts to its store at cache_url (kept, and added later).",
            registry=r,
        )
        # Present at zero from the start, so a rate() or an alert works before the first failure.
        for prefix_outcome in OUTCOMES:
            self.prefix.labels(prefix_outcome)
        for outcome in ("ok", "error", "timeout"):
            self.summariser_calls.labels(outcome)
        for kind in UPSTREAM_ERROR_KINDS:
            self.upstream_errors.labels(kind)
        for wire in WIRE_NAMES:
            self.tokens_removed.labels(wire)
            for stage in ("before", "after"):
                self.tokens.labels(wire, stage)
            for kind in KINDS:
                self.upstream_input_tokens.labels(wire, kind)
        for round_outcome in ("answered", "capped", "dropped"):
            self.expand_rounds.labels(round_outcome)
        for result in EXPAND_CALL_OUTCOMES:
            self.expand_calls.labels(result)
        self.fallbacks.labels("strategy_error")
        self.fallbacks.labels("compaction_deadline")

    def upstream_error(self, kind: str) -> None:
        self.upstream_errors.labels(kind).inc()

    def summariser_call(self, outcome: str) -> None:
        self.summariser_calls.labels(outcome).inc()

    def upstream_input(self, wire: str, usage: InputUsage) -> None:
        """What one upstream answer reported of its input (app.savings.Ledger.usage counts it for the ledger too)."""
        for kind, count in usage.by_kind().items():
            if count:
                self.upstream_input_tokens.labels(wire, kind).inc(count)

    def compacted(self, compacted: Compacted, wire: str) -> None:
        """One request compacted in the wire format named `wire` (WireFormat.name)."""
        if compacted.counted:
            self.tokens.labels(wire, "before").inc(compacted.result.tokens_before)
            self.tokens.labels(wire, "after").inc(compacted.result.tokens_after)
            # A strategy may add tokens (notes can outgrow what they replace); a counter must not go backwards.
            self.tokens_removed.labels(wire).inc(max(0, compacted.result.tokens_before - compacted.result.tokens_after))
        if compacted.prefix:
            self.prefix.labels(compacted.prefix).inc()
        for step in compacted.result.steps:
            self.strategy_time.labels(step.strategy).observe(step.ms / 1000)
        if compacted.fallback:
            self.fallbacks.labels(compacted.fallback).inc()

    def exposition(self) -> bytes:
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        # Only counters and histograms, which add up across processes; a dead worker's files stay and keep
        # counting, so totals never go backwards when the supervisor replaces it.
        merged = CollectorRegistry()
        MultiProcessCollector(merged, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        return generate_latest(merged)


def _route(scope: Scope) -> str:
    # The router records the route it matched in the scope, which is shared down the middleware stack.
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED


class MetricsMiddleware:
    """Pure ASGI: counts each request when its response has ended, streams included."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the server answers when the app raises before a response started

        async def timed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                self.metrics.response_start.labels(_route(scope)).observe(time.perf_counter() - started)
            await send(message)

        try:
            await self.app(scope, receive, timed_send)
        finally:
            route = _route(scope)
            self.metrics.requests.labels(route, str(status)).inc()
            self.metrics.duration.labels(route).observe(time.perf_counter() - started)
