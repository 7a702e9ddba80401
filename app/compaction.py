"""From a raw chat request to the bytes sent upstream: pick the chain, run it off the event loop, in a lane
(app.lanes), within the request's compaction deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from strategies import (
    Chain,
    ChainResult,
    ChainSyntaxError,
    Context,
    Memo,
    ModelTable,
    Registry,
    StrategyError,
    TokenCounter,
    parse_chain,
)
from strategies.deadline import CompactionStopped, Deadline

from .errors import ApiError
from .headers import RawHeaders
from .jsonbody import dump_body, parse_chat_body
from .lanes import Lanes
from .request_policy import RequestPolicy
from .settings import DEFAULT_MAX_JSON_DEPTH

if TYPE_CHECKING:
    from .notes import NotesTools
    from .prefix_tracking import Outcome, PrefixTracker

STRATEGIES_HEADER = "x-compaction-strategies"
DEADLINE_FALLBACK = "compaction_deadline"
logger = logging.getLogger("compaction_proxy.compaction")


@dataclass(frozen=True)
class Compacted:
    body: bytes  # what goes upstream
    chain: Chain
    result: ChainResult
    fallback: str | None = None
    prefix: Outcome | None = None  # what this request did to the provider's prompt cache; None: not tracked
    counted: bool = True  # False: stopped before its tokens were counted (the deadline); no token headers

    @classmethod
    def uncompacted(cls, raw: bytes, chain: Chain, reason: str) -> Compacted:
        """The request as it came, for when compaction could not run to its end."""
        return cls(raw, chain, ChainResult([], 0, 0), fallback=reason, counted=False)

    def response_headers(self) -> RawHeaders:
        headers = [(b"x-compaction-strategies", self.chain.spec.encode())]
        if self.counted:
            headers.append((b"x-compaction-tokens-before", str(self.result.tokens_before).encode()))
            headers.append((b"x-compaction-tokens-after", str(self.result.tokens_after).encode()))
        if self.fallback:
            headers.append((b"x-compaction-fallback", self.fallback.encode()))
        if self.prefix:
            headers.append((b"x-compaction-prefix", self.prefix.encode()))
        return headers


def _unchanged(before: list[Any], after: list[Any]) -> bool:
    return after is before or (len(after) == len(before) and all(a is b for a, b in zip(after, before, strict=True)))


class Compactor:
    def __init__(
        self,
        registry: Registry,
        counter: TokenCounter,
        models: ModelTable,
        default_chain: str,
        configured: Mapping[str, Mapping[str, Any]],
        *,
        lanes: Lanes,
        policy: RequestPolicy,
        deadline_seconds: float | None = None,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
        fail_open: bool = True,
        memo: Memo | None = None,
    ) -> None:
        """Raises ValueError, naming the setting, when the configured chain or parameters are invalid.

        policy: which config-only parameters a request's header may set.
        deadline_seconds: how long one request's compaction may take (None: no limit).
        fail_open: when a strategy raises, forward the request uncompacted (True) or answer 500 (False).
        """
        for name, params in configured.items():
            try:
                registry.params_for(name, params)
            except StrategyError as exc:
                raise ValueError(f"strategies.{name}: {exc}") from None
        try:
            self.default_chain = Chain.parse(default_chain, registry, configured)
        except (ChainSyntaxError, StrategyError) as exc:
            raise ValueError(f"default_strategies: {exc}") from None
        self.registry = registry
        self.counter = counter
        self.models = models
        self.configured = configured
        self.fail_open = fail_open
        self.memo = memo
        self.lanes = lanes
        self.policy = policy
        self.deadline_seconds = deadline_seconds
        self.max_json_depth = max_json_depth

    def deadline(self) -> Deadline:
        """A new request's deadline, started now."""
        return Deadline(self.deadline_seconds)

    def chain_for(self, header: str | None) -> Chain:
        if header is None:
            return self.default_chain
        try:
            chain = Chain.parse(header, self.registry, self.configured)
        except ChainSyntaxError as exc:
            raise ApiError(
                400,
                f"Invalid X-Compaction-Strategies header: {exc}",
                param="X-Compaction-Strategies",
                code="invalid_strategy_header",
            ) from None
        except StrategyError as exc:
            raise ApiError(
                400, f"Invalid X-Compaction-Strategies header: {exc}", param="X-Compaction-Strategies", code=exc.code
            ) from None
        self.policy.check(parse_chain(header))
        return chain

    async def compact(
        self,
        raw: bytes,
        header: str | None,
        deadline: Deadline,
        *,
        trace: bool = False,
        notes: NotesTools | None = None,
        prefix: PrefixTracker | None = None,
        scope: bytes = b"",
    ) -> Compacted:
        """Raises ApiError for a bad header or body (or a full lane), CompactionStopped("cancelled") when the
        deadline is cancelled (the client went away). Past the deadline: the request uncompacted.
        scope: the client's (Keys.client_scope), which prefix tracking keeps its state under.
        """
        chain = self.chain_for(header)
        lane = self.lanes.for_body(len(raw))
        try:
            # Parsing and compacting a multi-megabyte history takes milliseconds of CPU: not on the event loop.
            # The notes strategy's summariser calls, and the prefix tracker's cache I/O, too, wait in that thread.
            return await lane.run(
                lambda: self.compact_sync(raw, chain, deadline, trace, notes, prefix, scope), len(raw), deadline
            )
        except CompactionStopped as exc:
            if exc.reason == "cancelled":
                raise
            logger.warning("compaction passed its deadline waiting for a thread; forwarding uncompacted")
            return Compacted.uncompacted(raw, chain, DEADLINE_FALLBACK)
        finally:
            deadline.finish()

    def compact_sync(
        self,
        raw: bytes,
        chain: Chain,
        deadline: Deadline | None = None,
        trace: bool = False,
        notes: NotesTools | None = None,
        prefix: PrefixTracker | None = None,
        scope: bytes = b"",
    ) -> Compacted:
        """The whole CPU-bound path: parse, compact, count, serialise. Raises ApiError on a bad body, and
        CompactionStopped("cancelled") once the deadline is cancelled.

        notes: the summariser and cache for the notes strategy; without them it falls back.
        prefix: judges the forwarded messages against the conversation's previous request; None: not tracked.
        """
        body, stdlib = parse_chat_body(raw, self.max_json_depth)
        messages = body["messages"]
        model = body.get("model")
        model = model if isinstance(model, str) else ""
        ctx = Context(
            model=model,
            tokens=self.counter,
            request={k: v for k, v in body.items() if k != "messages"},
            limits=self.models.lookup(model),
            summariser=notes.summariser if notes else None,
            notes_cache=notes.cache if notes else None,
            chains=self.parse_configured,
            memo=self.memo,
            deadline=deadline,
        )
        compacted = self._run(raw, body, stdlib, chain, ctx, trace)
        if prefix is None:
            return compacted
        # ctx.digest: the token counts already hashed every message, original and forwarded.
        outcome = prefix.observe(model, messages, compacted.result.messages, ctx.digest, scope=scope)
        return replace(compacted, prefix=outcome)

    def _run(
        self, raw: bytes, body: dict[str, Any], stdlib: bool, chain: Chain, ctx: Context, trace: bool
    ) -> Compacted:
        messages = body["messages"]
        try:
            result = chain.run(messages, ctx, trace=trace)
        except CompactionStopped as exc:
            if exc.reason == "cancelled":
                raise
            logger.warning("compaction with %s passed its deadline; forwarding uncompacted", chain.spec)
            return Compacted.uncompacted(raw, chain, DEADLINE_FALLBACK)
        except Exception:
            if not self.fail_open:
                logger.exception("strategy chain %s failed; answering 500", chain.spec)
                raise ApiError(
                    500,
                    f"Compaction failed: the strategy chain {chain.spec!r} raised an error. "
                    "Send 'X-Compaction-Strategies: none' to skip compaction.",
                    type="server_error",
                    code="compaction_failed",
                ) from None
            # Fail open: a strategy bug must not cost the user their request.
            logger.exception("strategy chain %s failed; forwarding the request uncompacted", chain.spec)
            tokens = ctx.count_request(messages)
            return Compacted(raw, chain, ChainResult(messages, tokens, tokens), fallback="strategy_error")
        if _unchanged(messages, result.messages):
            # Byte-identical forwarding keeps the provider's prompt cache and every formatting detail.
            return Compacted(raw, chain, result, fallback=result.fallback)
        return Compacted(dump_body({**body, "messages": result.messages}, stdlib), chain, result, result.fallback)

    def parse_configured(self, text: str) -> Chain:
        """A chain from its text with the configured parameters (the notes strategy's fallback chain)."""
        return Chain.parse(text, self.registry, self.configured)
