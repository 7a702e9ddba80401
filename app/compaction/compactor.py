"""From a raw request to the bytes sent upstream: pick the chain, run it (a small body on the event loop, any
other off it in a lane, app.compaction.lanes) within the request's compaction deadline, with what the chain needs
for this client.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from starlette.requests import Request

from app.compaction.inspect import Inspection
from app.compaction.lanes import Lanes, unless_disconnected
from app.compaction.prefix import Outcome, PrefixTracker, conversation_key
from app.edge.errors import ApiError
from app.edge.headers import FALLBACK, INTERNAL, PREFIX, STRATEGIES, TOKENS_AFTER, TOKENS_BEFORE, RawHeaders
from app.expansion import Expansion
from app.expansion.memory import NAMESPACE, ExpansionMemory
from app.expansion.rounds import with_rounds
from app.notes.runtime import NotesRuntime, NotesTools
from app.policy.keys import Keys
from app.policy.parameters import RequestPolicy
from app.settings import Settings
from app.upstream.models import Resolved, UpstreamModels
from app.wire import Parsed, WireFormat
from app.wire.base import ExpandTool
from strategies import (
    BUILTINS,
    Chain,
    ChainResult,
    ChainSyntaxError,
    Context,
    Encodings,
    Memo,
    ModelLimits,
    ModelTable,
    Registry,
    StrategyError,
    TokenCounter,
    parse_chain,
)
from strategies.context import CompactionStopped, Deadline
from strategies.diff import Diff
from strategies.digests import prefix_digests
from strategies.refs import Originals, stub_refs

DEADLINE_FALLBACK = "compaction_deadline"
# Past this many messages a body is compacted in a thread whatever its size: the strategies' work grows with the
# messages (about 5 us each), and 100 KB of one-word messages would hold the event loop for tens of milliseconds.
INLINE_MAX_MESSAGES = 512
logger = logging.getLogger("compaction_proxy.compaction")


@dataclass(frozen=True)
class Compacted:
    body: bytes  # what goes upstream
    chain: Chain
    result: ChainResult
    fallback: str | None = None
    prefix: Outcome | None = None  # what this request did to the provider's prompt cache; None: not tracked
    counted: bool = True  # False: stopped before its tokens were counted (the deadline); no token headers
    expansion: Expansion | None = None  # the expand tool was offered: the proxy answers its calls
    model: str = ""
    resolved: Resolved | None = None  # the model's limits and calibration it was compacted with
    undiscovered: bool = False  # compacted with an assumed window before the upstream was asked for it; not tracked
    inspection: Inspection | None = None  # what it did to each message, where inspect_requests keeps it

    def counted_raw(self) -> int:
        """tokens_after as the counter made it, before calibration: what the upstream's own count is compared to."""
        calibration = self.resolved.calibration if self.resolved is not None else 1.0
        return round(self.result.tokens_after / calibration)

    @classmethod
    def uncompacted(cls, raw: bytes, chain: Chain, reason: str) -> Compacted:
        """The request as it came, for when compaction could not run to its end."""
        return cls(raw, chain, ChainResult([], 0, 0), fallback=reason, counted=False)

    def response_headers(self) -> RawHeaders:
        headers = [(STRATEGIES, self.chain.spec.encode())]
        if self.counted:
            headers.append((TOKENS_BEFORE, str(self.result.tokens_before).encode()))
            headers.append((TOKENS_AFTER, str(self.result.tokens_after).encode()))
        if self.fallback:
            headers.append((FALLBACK, self.fallback.encode()))
        if self.prefix:
            headers.append((PREFIX, self.prefix.encode()))
        return headers


def settled(wire: WireFormat, parsed: Parsed, result: ChainResult, ctx: Context) -> ChainResult:
    """The chain's result with what the format must send put back (WireFormat.settle), counted as it will go."""
    messages = wire.settle(parsed, result.messages)
    if messages is result.messages:
        return result
    return replace(result, messages=messages, tokens_after=ctx.count_request(messages))


def _without_the_tool(result: ChainResult, parsed: Parsed, ctx: Context) -> ChainResult:
    """The result counted as it goes when the expand tool, which the chain fitted the request with, is not offered
    after all (no stub needs it): every count less the tool's definition.
    """
    if ctx.request is parsed.request:
        return result
    tool = ctx.count_request([]) - replace(ctx, request=parsed.request).count_request([])
    steps = [replace(s, tokens_before=s.tokens_before - tool, tokens_after=s.tokens_after - tool) for s in result.steps]
    return replace(
        result, tokens_before=result.tokens_before - tool, tokens_after=result.tokens_after - tool, steps=steps
    )


def inline_safe(chain: Chain) -> bool:
    """Whether the chain may run on the event loop: only the built-in strategies, whose work is CPU alone and
    near-linear in the body (strategies/), never a plugin's (which may block), nor notes (a summariser call).
    """
    return all(type(step) in BUILTINS and not step.uses_summariser for step in chain.every_step())


def _unchanged(before: list[Any], after: list[Any]) -> bool:
    return after is before or (len(after) == len(before) and all(a is b for a, b in zip(after, before, strict=True)))


class Compactor:
    """Built once per app (create_app); compacts each request with the app's caches and services."""

    def __init__(
        self,
        settings: Settings,
        registry: Registry,
        counter: TokenCounter,
        model_table: ModelTable,
        *,
        memo: Memo | None = None,
        keys: Keys | None = None,
        notes: NotesRuntime | None = None,
        prefix: PrefixTracker | None = None,
        expansions: ExpansionMemory | None = None,
        upstream_models: UpstreamModels | None = None,
    ) -> None:
        """Raises ValueError, naming the setting, when the configured chain, parameters or request_parameters
        are invalid. keys: who a request comes from (prefix and notes state are kept per client); notes: the
        summariser and notes cache (None: notes falls back); prefix: the prompt-cache report (None: off);
        expansions: where expand rounds are remembered (None: nowhere, each request shows only its own);
        upstream_models: each model's window and calibration as learned from the upstream (None: the table's alone).
        """
        configured = settings.strategies
        for name, params in configured.items():
            try:
                registry.params_for(name, params)
            except StrategyError as exc:
                raise ValueError(f"strategies.{name}: {exc}") from None
        try:
            self.default_chain = Chain.parse(settings.default_strategies, registry, configured)
        except (ChainSyntaxError, StrategyError) as exc:
            raise ValueError(f"default_strategies: {exc}") from None
        self.settings = settings
        self.registry = registry
        self.counter = counter
        self.model_table = model_table
        self.memo = memo
        self.keys = keys
        self.notes = notes
        self.prefix = prefix
        self.expansions = expansions
        self.upstream_models = upstream_models
        self.lanes = Lanes(settings)
        self.policy = RequestPolicy(registry, settings.request_parameters, settings.summariser_models)
        self.deadline_seconds: float | None = settings.compaction_deadline_seconds
        # With every cache in this process, compacting a small body is CPU alone, and briefly: no thread for it.
        self.inline_bytes = settings.inline_compaction_bytes if settings.cache_in_process else 0

    def chain_for(self, header: str | None) -> Chain:
        if header is None:
            return self.default_chain
        try:
            chain = Chain.parse(header, self.registry, self.settings.strategies)
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

    async def compact_request(
        self, request: Request, raw: bytes, wire: WireFormat, *, tracked: bool, window: int | None = None
    ) -> Compacted | None:
        """The request's body compacted, or None when the client went away meanwhile (the work then stops).
        Raises ApiError for a bad header or body, or a full lane. Past the deadline: the body as it came.
        tracked: report what it does to the provider's prompt cache (X-Compaction-Prefix); window: a window the
        upstream has just stated, which caps the model's (whether it could be kept or not).
        """
        internal = request.headers.get(INTERNAL.decode()) is not None
        # A summariser call of a proxy (this one's, looped back by configuration, or another's) is never
        # compacted nor tracked, whatever else it says: its input is what is being summarised.
        chain = self.chain_for("none" if internal else request.headers.get(STRATEGIES.decode()))
        deadline = Deadline(self.deadline_seconds)
        # Who asks (authenticate has accepted the key): what the proxy keeps for a client is kept per client.
        scope = self.keys.client_scope(request.headers.raw) if self.keys is not None else b""
        notes = None
        if chain.uses_summariser and self.notes is not None:
            notes = self.notes.for_request(request.headers.raw, deadline, scope)
        prefix = self.prefix if tracked and not internal else None
        parsed = None
        if len(raw) < self.inline_bytes and inline_safe(chain):
            parsed = wire.parse(raw, self.settings.max_json_depth)  # a few hundred microseconds at most, here
            if len(parsed.messages) <= INLINE_MAX_MESSAGES:
                # A millisecond or two of CPU: a thread would add its hop and a fight for the GIL with the event
                # loop, and the client cannot go away meanwhile, since nothing else runs.
                try:
                    return self.compact_sync(
                        raw, wire, chain, deadline=deadline, prefix=prefix, scope=scope, parsed=parsed, window=window
                    )
                finally:
                    deadline.finish()

        def work() -> Compacted:
            return self.compact_sync(
                raw,
                wire,
                chain,
                deadline=deadline,
                notes=notes,
                prefix=prefix,
                scope=scope,
                parsed=parsed,
                window=window,
            )

        lane = self.lanes.for_body(len(raw))
        try:
            # Parsing and compacting a multi-megabyte history takes milliseconds of CPU: not on the event loop.
            # The notes strategy's summariser calls, and the prefix tracker's cache I/O, too, wait in that thread.
            return await unless_disconnected(request, deadline, lambda: lane.run(work, len(raw), deadline))
        except CompactionStopped as exc:
            if exc.reason == "cancelled":
                logger.info("the client went away during compaction; it was stopped")
                return None
            logger.warning("compaction passed its deadline waiting for a thread; forwarding uncompacted")
            return Compacted.uncompacted(raw, chain, DEADLINE_FALLBACK)
        finally:
            deadline.finish()

    def compact_sync(
        self,
        raw: bytes,
        wire: WireFormat,
        chain: Chain,
        *,
        deadline: Deadline | None = None,
        notes: NotesTools | None = None,
        prefix: PrefixTracker | None = None,
        scope: bytes = b"",
        parsed: Parsed | None = None,
        window: int | None = None,
    ) -> Compacted:
        """The whole CPU-bound path: parse, compact, count, serialise. Raises ApiError on a bad body, and
        CompactionStopped("cancelled") once the deadline is cancelled. wire: the body's format; notes: the summariser
        and notes cache; prefix: the prompt-cache report, kept per `scope`; parsed: `raw` as `wire` has parsed it
        already (None: parsed here); window: caps the model's (compact_request).
        """
        if parsed is None:
            parsed = wire.parse(raw, self.settings.max_json_depth)
        tool = wire.expand if chain.reversible and self.settings.expand_max_rounds else None
        offered = tool.offer(parsed) if tool is not None else None
        resolved = self._resolve(parsed, wire, scope, window)
        ctx = Context(
            model=parsed.model,
            tokens=self.counter,
            # The expand tool's definition, where it may be offered, is read by the model like the client's tools: the
            # chain fits the request with it, so a small window is not passed by what the proxy adds.
            request=offered.request if offered is not None else parsed.request,
            limits=resolved.limits,
            calibration=resolved.calibration,
            safety_margin_percent=self.settings.safety_margin_percent,
            summariser=notes.summariser if notes else None,
            notes_cache=notes.cache if notes else None,
            memo=self.memo,
            deadline=deadline,
            expandable=offered is not None,
        )
        reversible = None
        if tool is not None and offered is not None:
            reversible = self._reversible(parsed, offered, wire, tool, ctx, scope)
        compacted = replace(self._run(raw, parsed, wire, chain, ctx, reversible), model=parsed.model, resolved=resolved)
        models = self.upstream_models
        if resolved.source == "assumed" and models is not None and models.may_discover(wire.name):
            # The route asks the upstream and compacts again: only what is forwarded is tracked.
            return replace(compacted, undiscovered=True)
        if prefix is None or not compacted.counted:
            return compacted
        # ctx.digest: the token counts already hashed every message, original and forwarded.
        outcome = prefix.observe(parsed.model, parsed.messages, compacted.result.messages, ctx.digest, scope=scope)
        return replace(compacted, prefix=outcome)

    def _resolve(self, parsed: Parsed, wire: WireFormat, scope: bytes, window: int | None) -> Resolved:
        """The model's limits and this client's calibration, capped by a window just stated."""
        model, extended = parsed.model, parsed.extended_context
        if self.upstream_models is not None:
            resolved = self.upstream_models.resolve(model, wire.name, extended=extended, client=scope.hex())
        else:
            resolved = Resolved(self.model_table.lookup(model, extended), "table", 1.0, model, wire.name, extended)
        limits = resolved.limits
        if window is not None and window < limits.context_window:
            capped = ModelLimits(context_window=window, max_output=limits.max_output)
            resolved = replace(resolved, limits=capped, source="learned")
        return resolved

    def _reversible(
        self, parsed: Parsed, offered: Parsed, wire: WireFormat, tool: ExpandTool, ctx: Context, scope: bytes
    ) -> Expansion:
        """What the rounds of a request that may be offered the expand tool need, its remembered rounds put back in
        its messages (app.expansion.memory); `forwarded` is filled in once the chain has run.
        """
        original = parsed.messages
        prefixes = prefix_digests(ctx.digest(m) for m in original)
        key = None
        messages = original
        if self.expansions is not None:
            key = conversation_key(parsed.model, original, ctx.digest, scope, namespace=NAMESPACE)
            rounds = self.expansions.recall(key)
            if rounds:
                limit = self.settings.expand_max_chars
                messages = with_rounds(original, prefixes, rounds, Originals(original), limit, tool.turn_again)
        anchor = prefixes[-1].hex() if prefixes else ""
        return Expansion(wire, offered, parsed, messages, Originals(messages), key, len(original), anchor, ctx)

    def _run(
        self, raw: bytes, parsed: Parsed, wire: WireFormat, chain: Chain, ctx: Context, reversible: Expansion | None
    ) -> Compacted:
        """reversible: set when the expand tool may be offered; its `forwarded` holds the messages to compact."""
        messages = reversible.forwarded if reversible is not None else parsed.messages
        diff = Diff(messages) if self.settings.inspect_requests else None
        try:
            # trace: per-step timings for the metrics and /compact, at the cost of a token count per step (cached).
            ran = chain.run(messages, ctx, trace=True, watch=diff.step if diff is not None else None)
            result = settled(wire, parsed, ran, ctx)
            inspection = None
            if diff is not None:
                diff.step(None, ran.messages, result.messages)  # what the format must send: no strategy's doing
                inspection = Inspection.of(diff.rows(), self.settings.inspect_entry_chars)
            # Rendering fails open like a strategy: a bug in writing the body back must not cost the user their
            # request.
            expansion = None
            if reversible is not None and any(
                reversible.originals.resolve(ref) is not None for ref in stub_refs(result.messages)
            ):
                expansion = replace(reversible, forwarded=result.messages)
                body = wire.render(expansion.offered, result.messages)
            else:
                result = _without_the_tool(result, parsed, ctx)
                if _unchanged(parsed.messages, result.messages):
                    # Byte-identical forwarding keeps the provider's prompt cache and every formatting detail.
                    body = raw
                else:
                    body = wire.render(parsed, result.messages)
        except CompactionStopped as exc:
            if exc.reason == "cancelled":
                raise
            logger.warning("compaction with %s passed its deadline; forwarding uncompacted", chain.spec)
            return Compacted.uncompacted(raw, chain, DEADLINE_FALLBACK)
        except Exception:
            if self.settings.on_strategy_error == "fail":
                logger.exception("strategy chain %s failed; answering 500", chain.spec)
                raise ApiError(
                    500,
                    f"Compaction failed: the strategy chain {chain.spec!r} raised an error. "
                    "Send 'X-Compaction-Strategies: none' to skip compaction.",
                    type="server_error",
                    code="compaction_failed",
                ) from None
            # Fail open: a bug in a strategy, in settling or in rendering must not cost the user their request.
            logger.exception("strategy chain %s failed; forwarding the request uncompacted", chain.spec)
            tokens = ctx.count_request(messages)
            return Compacted(raw, chain, ChainResult(messages, tokens, tokens), fallback="strategy_error")
        return Compacted(body, chain, result, fallback=result.fallback, expansion=expansion, inspection=inspection)


def model_table(settings: Settings) -> ModelTable:
    """The packaged table with the operator's models (settings.models) over it; any other model gets the configured
    default limits (table.default). Raises ValueError for an entry the table cannot take.
    """
    default = ModelLimits(context_window=settings.default_context_window, max_output=settings.default_max_output)
    return ModelTable.packaged(settings.models, default)


def build_compactor(
    settings: Settings,
    registry: Registry | None = None,
    *,
    encodings: Encodings | None = None,
    models: ModelTable | None = None,
    keys: Keys | None = None,
    notes: NotesRuntime | None = None,
    prefix: PrefixTracker | None = None,
    expansions: ExpansionMemory | None = None,
    upstream_models: UpstreamModels | None = None,
) -> Compactor:
    """The Compactor as the proxy builds it from its settings (create_app), also for the benchmarks: so what they
    measure is what ships. Not given: the built-in and installed strategies, a token counter remembering
    settings.token_cache_size messages (on `encodings`: tokenizers already loaded), model_table(settings), the
    strategy memo of settings.strategy_memo_chars. What only a live server has (keys, notes, prefix, expansions,
    upstream_models: see Compactor) stays None unless given. Raises ValueError as Compactor does.
    """
    return Compactor(
        settings,
        registry or Registry.with_plugins(),
        TokenCounter(encodings if encodings is not None else Encodings(), cache_size=settings.token_cache_size),
        models if models is not None else model_table(settings),
        memo=Memo(settings.strategy_memo_chars) if settings.strategy_memo_chars else None,
        keys=keys,
        notes=notes,
        prefix=prefix,
        expansions=expansions,
        upstream_models=upstream_models,
    )
