"""Epochs: a strategy's boundary moves in jumps, and a jump is taken only when it pays for the cache it breaks.

Providers bill a prompt's cached prefix at a fraction of the input price, and caches match exact prefixes. A
strategy whose boundary moves with every request rewrites everything after it on every request. Here the rule
of a strategy (its `compact`) is applied only at jump points; between two jumps the compacted request is the
compacted request of the last jump point plus the messages that came since, untouched, so each request
extends the one before byte for byte.

Stateless: the jump points of a conversation are found by replaying it, request end by request end (every
position where the next message is the model's), so each request of a conversation finds the same ones. At a
request end the replay considers a jump when the part past the last jump point has grown by `epoch` (tool
calls or tokens, per strategy), or must jump when the request without one would pass the strategy's limit
(for most, the model's context window less the output reserve).

The break-even rule (`min_gain`). Let the request without the jump have S tokens after the first message the
jump changes, and let the jump remove R tokens. Prices relative to uncached input: w for a token written to
the cache (or not cached), r for a cached read. The jump writes S - R tokens that would have been read (cost
about S(w - r) - Rw on this request) and saves R cached reads on each of the k requests before the next jump
(kRr). It pays when R(w + kr) >= S(w - r), i.e. when R >= S(w - r) / (w + kr):

    Anthropic (w 1.25, r 0.1):  k = 10: 0.51   k = 20: 0.35   k = 40: 0.22
    OpenAI    (w 1.0,  r 0.5):  k = 10: 0.08   k = 20: 0.05

min_gain is that ratio. The default 0.35 is break-even at Anthropic's prices with 20 requests to the next
jump (an epoch of 20 tool calls in an agent loop that sends one request per call), and so also pays under
OpenAI's. A jump that changes nothing (the rule leaves the new messages as they are) is always taken: it
breaks nothing, and starts the next epoch.

fit and middle_out exist to keep a request under a limit, so no jump of theirs is optional: they jump only when
the request would pass it (and have no min_gain), and their rule then leaves one epoch of room below the limit,
so the next jump comes an epoch of growth later at the earliest. A jump at a mere epoch of growth would cut a
request that is within the limit.

With a Memo on the Context (the proxy has one), the replay remembers the last jump point at each request end
it has seen, under the digest of the conversation so far, so a request costs the rule once for its output
and at most once more for a jump; without one it replays every jump point from the start.
"""

from __future__ import annotations

import hashlib
from abc import abstractmethod
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import Field

from .base import Context, Message, Params, Strategy
from .budget import default_total
from .digests import prefix_digests
from .tool_pairs import tool_calls_of

Unit = Literal["tool_calls", "tokens"]

# Anthropic's prices with 20 requests to the next jump (see the module docstring).
DEFAULT_MIN_GAIN = 0.35
DEFAULT_EPOCH_CALLS = 20


def epoch_field(default: int | None, unit: Unit, default_text: str = "") -> Any:
    what = "tool calls" if unit == "tool_calls" else "tokens"
    return Field(
        default,
        ge=0,
        description=f"The boundary is recomputed only after the conversation past it has grown by this many {what}"
        f"{default_text} (0: on every request).",
    )


def min_gain_field(default: float = DEFAULT_MIN_GAIN) -> Any:
    return Field(
        default,
        ge=0,
        description="A jump is taken only if the tokens it removes are at least min_gain times the tokens after "
        "the first message it changes, which the provider must cache again (0.35: break-even at Anthropic's "
        "prices over 20 requests; 0: every jump; see strategies/epochs.py for the arithmetic).",
    )


class EpochParams(Params):
    """Parameters of a strategy with epochs; subclasses redeclare the field with their own default."""

    epoch: int | None = epoch_field(DEFAULT_EPOCH_CALLS, "tool_calls")


class BreakEvenParams(EpochParams):
    """Parameters of a strategy whose jumps are optional, and so weighed by the break-even rule."""

    min_gain: float = min_gain_field()


EP = TypeVar("EP", bound=EpochParams)


class EpochStrategy(Strategy[EP]):
    """A strategy whose boundary moves in epochs. Subclasses implement `compact`, the rule without epochs."""

    epoch_unit: ClassVar[Unit] = "tool_calls"
    # fit and middle_out: jumps only when the request would pass the limit, each leaving an epoch of room.
    jumps_at_limit_only: ClassVar[bool] = False

    @abstractmethod
    def compact(self, messages: list[Message], ctx: Context, room: int) -> list[Message]:
        """The strategy's rule applied to these messages as if they were the whole request. room: tokens
        to leave free below the strategy's limit for the growth of the next epoch (budget strategies).
        """

    def limit(self, ctx: Context) -> int:
        """Prompt tokens past which the request must jump whatever the epoch and min_gain say."""
        return default_total(ctx)

    def epoch_size(self, ctx: Context) -> int:
        return self.params.epoch or 0

    def over_limit(self, tokens: int, messages: int, ctx: Context) -> bool:
        return tokens > self.limit(ctx)

    def min_gain(self) -> float:
        value = getattr(self.params, "min_gain", 0.0)
        return float(value)

    def apply(self, messages: list[Message], ctx: Context) -> list[Message]:
        size = self.epoch_size(ctx)
        if size == 0 and self.min_gain() == 0:
            return self.compact(messages, ctx, 0)  # a boundary recomputed on every request: the rule alone
        return _Replay(self, messages, ctx, size).run()


def answered_at(messages: list[Message]) -> list[int]:
    """Where the model answered (every assistant message after the first message): the lengths of the
    requests a client sent before this one.
    """
    return [c for c in range(1, len(messages)) if messages[c].get("role") == "assistant"]


def request_ends(messages: list[Message]) -> list[int]:
    """Lengths of the requests of this conversation so far: each position where the model answered, and now."""
    return [*answered_at(messages), len(messages)] if messages else []


class _Replay:
    def __init__(self, strategy: EpochStrategy[Any], messages: list[Message], ctx: Context, size: int) -> None:
        self.strategy = strategy
        self.messages = messages
        self.ctx = ctx
        self.size = size
        tokens = [0]
        calls = [0]
        for message in messages:
            tokens.append(tokens[-1] + ctx.count_message(message))
            calls.append(calls[-1] + (len(tool_calls_of(message)) if message.get("role") == "assistant" else 0))
        self.tokens_upto = tokens  # tokens of messages[:i]
        self.growth_upto = tokens if strategy.epoch_unit == "tokens" else calls
        self.overhead = ctx.count_request([])
        self.limit = strategy.limit(ctx)
        # A jump leaves one epoch of room below the limit, but keeps at least half of it filled.
        self.room = min(size, self.limit // 2) if strategy.jumps_at_limit_only else 0
        self.jumps = self.evaluated = 0

    def run(self) -> list[Message]:
        ends = request_ends(self.messages)
        keys = self._keys()
        memo = self.ctx.memo
        start, at = 0, 0  # resume after the newest request end the memo knows, from its jump point
        if memo is not None and keys:
            for position in range(len(ends) - 1, -1, -1):
                found = memo.get(keys[ends[position] - 1])
                if found is not None:
                    start, at = position + 1, int(found)
                    break
        base, details = self._compact(at)
        base_tokens = self._count(base)
        for end in ends[start:]:
            jumped = self._consider(at, base, base_tokens, end)
            if jumped is not None:
                at, (base, details) = end, jumped
                base_tokens = self._count(base)
            if memo is not None:
                memo.put(keys[end - 1], str(at))
        self.ctx.details.clear()
        self.ctx.report(
            **details, epoch_boundary=at, epoch_tail=len(self.messages) - at, jumps=self.jumps, evaluated=self.evaluated
        )
        return base + self.messages[at:]

    def _keys(self) -> list[bytes]:
        """The memo key of each prefix: its digest, scoped by what else the rule depends on."""
        ctx = self.ctx
        scope = repr(
            (
                "epochs",
                self.strategy.name,
                self.strategy.params.model_dump_json(),
                ctx.model,
                ctx.limits,
                ctx.output_reserve(),
                self.overhead,
            )
        ).encode()
        return prefix_digests((ctx.digest(m) for m in self.messages), hashlib.blake2b(scope).digest())

    def _compact(self, end: int) -> tuple[list[Message], dict[str, Any]]:
        """The rule over the first `end` messages, and what it reported."""
        if end == 0:
            return [], {}
        self.ctx.details.clear()
        out = self.strategy.compact(self.messages[:end], self.ctx, self.room)
        return out, dict(self.ctx.details)

    def _count(self, messages: list[Message]) -> int:
        return self.overhead + sum(self.ctx.count_message(m) for m in messages)

    def _consider(
        self, at: int, base: list[Message], base_tokens: int, end: int
    ) -> tuple[list[Message], dict[str, Any]] | None:
        """At a request end: the jump's result if the boundary moves here, else None."""
        staying = base_tokens + self.tokens_upto[end] - self.tokens_upto[at]
        forced = self.strategy.over_limit(staying, len(base) + end - at, self.ctx)
        grown = self.growth_upto[end] - self.growth_upto[at]
        if not forced and (self.strategy.jumps_at_limit_only or grown < self.size):
            return None
        self.evaluated += 1
        jumped, details = self._compact(end)
        if forced or self._pays(base + self.messages[at:end], staying, jumped):
            self.jumps += 1
            return jumped, details
        return None

    def _pays(self, staying: list[Message], staying_tokens: int, jumped: list[Message]) -> bool:
        count, digest = self.ctx.count_message, self.ctx.digest
        kept = 0  # tokens of the messages both requests start with, which stay cached
        for old, new in zip(staying, jumped, strict=False):
            if old is not new and digest(old) != digest(new):
                break
            kept += count(old)
        else:
            if len(jumped) >= len(staying):
                return True  # nothing changes: moving the boundary here is free
        rewritten = staying_tokens - self.overhead - kept
        removed = staying_tokens - self._count(jumped)
        return removed > 0 and removed >= self.strategy.min_gain() * rewritten
