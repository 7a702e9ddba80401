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

Limits. fit and middle_out exist to keep a request under a limit, so no jump of theirs is optional: they jump
only when the request would pass it (and have no min_gain), and their cut then leaves one epoch of room below
the limit, so the next jump comes an epoch of growth later at the earliest. Every other strategy with epochs,
when the request would pass its limit between two of its epochs, cuts like fit: the oldest whole units of what
it sends go until half the limit is free. So a request with epochs is never forwarded over the limit while its
pinned messages fit.

Work per request (a request is untrusted input). A cut is priced on a layout of the request built once
(strategies.layout), in time proportional to what it keeps; cuts leave room, so there are at most about
2 T / limit of them for T tokens. The rule itself costs the whole prefix, so it is evaluated again only once
the conversation has grown by 1/GEOMETRIC of its messages since the last evaluation (and by an epoch): at most
about GEOMETRIC * ln(n) evaluations for n messages, whatever the parameters. In a short conversation that is
every epoch; in one of 1,000 messages, a jump waits at least 125 messages.

With a Memo on the Context (the proxy has one), the replay remembers its state at the end of each request it
has seen, under the digest of the conversation so far, so the next request of the conversation costs the rule
once to rebuild its base and once more at most for a jump; without one it replays from the start.
"""

from __future__ import annotations

import hashlib
from abc import abstractmethod
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import Field

from .base import Context, Message, Params, Strategy
from .budget import default_total
from .digests import prefix_digests
from .layout import Cut, Layout, Prefix, fit_cut
from .tool_pairs import tool_calls_of

Unit = Literal["tool_calls", "tokens"]

# Anthropic's prices with 20 requests to the next jump (see the module docstring).
DEFAULT_MIN_GAIN = 0.35
DEFAULT_EPOCH_CALLS = 20
# The rule is evaluated again only after the conversation grew by 1/GEOMETRIC of its messages.
GEOMETRIC = 8


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
    """A strategy whose boundary moves in epochs. Subclasses implement `compact`, the rule without epochs;
    strategies that only keep a request under a limit (jumps_at_limit_only) implement `cut` instead.
    """

    epoch_unit: ClassVar[Unit] = "tool_calls"
    # fit and middle_out: jumps only when the request would pass the limit, each leaving an epoch of room.
    jumps_at_limit_only: ClassVar[bool] = False

    @abstractmethod
    def compact(self, messages: list[Message], ctx: Context) -> list[Message]:
        """The strategy's rule applied to these messages as if they were the whole request."""

    def cut(self, prefix: Prefix, floor: int, room: int, ctx: Context) -> Cut:
        """Bring the prefix under the limit less `room` by dropping whole units: by default as fit does, the
        oldest first, never the ones before `floor` (units an earlier cut dropped already).
        """
        return fit_cut(prefix, max(0, self.limit(ctx) - room), floor)

    def room(self, ctx: Context) -> int:
        """Tokens a cut leaves free below the limit, for the growth until the next one."""
        return self.limit(ctx) // 2

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
            return self.compact(messages, ctx)  # a boundary recomputed on every request: the rule alone
        return _Replay(self, messages, ctx, size).run()


def answered_at(messages: list[Message]) -> list[int]:
    """Where the model answered (every assistant message after the first message): the lengths of the
    requests a client sent before this one.
    """
    return [c for c in range(1, len(messages)) if messages[c].get("role") == "assistant"]


def request_ends(messages: list[Message]) -> list[int]:
    """Lengths of the requests of this conversation so far: each position where the model answered, and now."""
    return [*answered_at(messages), len(messages)] if messages else []


class _Base:
    """The compacted request at the last jump point `at`: the rule's output at its last jump `rule_end`
    (none: 0), then the messages since, without the units the last cut dropped.
    """

    def __init__(self, messages: list[Message], rule_out: list[Message], rule_end: int, ctx: Context) -> None:
        self.messages = messages
        self.rule_out = rule_out
        self.rule_end = rule_end
        self.ctx = ctx
        self._layout: Layout | None = None

    @property
    def layout(self) -> Layout:
        """The units of the rule's output plus every message after it, built when a cut first needs them."""
        if self._layout is None:
            source = self.rule_out + self.messages[self.rule_end :] if self.rule_end else self.messages
            self._layout = Layout.of(source, self.ctx)
        return self._layout

    def prefix(self, end: int) -> Prefix:
        """The layout's prefix holding the request up to the message index `end`."""
        return self.layout.prefix(len(self.rule_out) + end - self.rule_end)

    def messages_at(self, at: int, cut: Cut | None) -> list[Message]:
        if cut is None:
            return self.rule_out + self.messages[self.rule_end : at]
        return self.prefix(at).gather(cut.lo, cut.hi)


class _Replay:
    def __init__(self, strategy: EpochStrategy[Any], messages: list[Message], ctx: Context, size: int) -> None:
        self.strategy = strategy
        self.messages = messages
        self.ctx = ctx
        self.size = size
        tokens = [0]
        calls = [0]
        for message in messages:
            ctx.checkpoint()
            tokens.append(tokens[-1] + ctx.count_message(message))
            calls.append(calls[-1] + (len(tool_calls_of(message)) if message.get("role") == "assistant" else 0))
        self.tokens_upto = tokens  # tokens of messages[:i]
        self.growth_upto = tokens if strategy.epoch_unit == "tokens" else calls
        self.overhead = ctx.count_request([])
        self.room = min(strategy.room(ctx), size) if strategy.jumps_at_limit_only else strategy.room(ctx)
        self.jumps = self.evaluated = self.cuts = 0
        self.details: dict[str, Any] = {}
        # The state, also what the memo keeps: the last jump point, the rule's last jump, the last cut's range
        # and the last position the rule was evaluated at.
        self.at = self.rule_end = self.last_eval = 0
        self.cut: Cut | None = None
        self.base = _Base(messages, [], 0, ctx)
        self.base_tokens, self.base_count = self.overhead, 0

    def run(self) -> list[Message]:
        ends = request_ends(self.messages)
        keys = self._keys()
        memo = self.ctx.memo
        start = 0
        if memo is not None and keys:
            for position in range(len(ends) - 1, -1, -1):
                found = memo.get(keys[ends[position] - 1])
                if found is not None:
                    start = position + 1
                    self._restore(found)
                    break
        for end in ends[start:]:
            self.ctx.checkpoint()
            self._step(end)
        if memo is not None and keys:
            memo.put(keys[-1], self._state())
        self.ctx.details.clear()
        self.ctx.report(
            **self.details,
            epoch_boundary=self.at,
            epoch_tail=len(self.messages) - self.at,
            jumps=self.jumps,
            evaluated=self.evaluated,
            limit_cuts=self.cuts,
        )
        return self.base.messages_at(self.at, self.cut) + self.messages[self.at :]

    def _state(self) -> str:
        lo, hi = (self.cut.lo, self.cut.hi) if self.cut is not None else (-1, -1)
        return f"{self.at},{self.rule_end},{self.last_eval},{lo},{hi}"

    def _restore(self, state: str) -> None:
        at, rule_end, last_eval, lo, hi = (int(part) for part in state.split(","))
        self.at, self.last_eval = at, last_eval
        if rule_end:
            self._set_rule(rule_end, self._rule(rule_end))
        if lo >= 0:
            self.cut = self.base.prefix(at).kept(lo, hi)
            self.base_tokens, self.base_count = self.cut.tokens, self.cut.count
        else:
            self.cut = None
            staying = self.base.messages_at(at, None)
            self.base_tokens, self.base_count = self._count(staying), len(staying)

    def _keys(self) -> list[bytes]:
        """The memo key of each prefix: its digest, scoped by what else the rule depends on."""
        ctx = self.ctx
        scope = repr(
            (
                "epochs-v2",
                self.strategy.name,
                self.strategy.params.model_dump_json(),
                ctx.model,
                ctx.limits,
                ctx.output_reserve(),
                self.overhead,
            )
        ).encode()
        return prefix_digests((ctx.digest(m) for m in self.messages), hashlib.blake2b(scope).digest())

    def _rule(self, end: int) -> list[Message]:
        """The rule over the first `end` messages; what it reported is kept for the stats."""
        self.ctx.details.clear()
        out = self.strategy.compact(self.messages[:end], self.ctx)
        self.details = dict(self.ctx.details)
        return out

    def _set_rule(self, end: int, out: list[Message]) -> None:
        self.rule_end = end
        self.base = _Base(self.messages, out, end, self.ctx)

    def _count(self, messages: list[Message]) -> int:
        return self.overhead + sum(self.ctx.count_message(m) for m in messages)

    def _grown(self, since: int, end: int) -> int:
        return self.growth_upto[end] - self.growth_upto[since]

    def _step(self, end: int) -> None:
        strategy, ctx = self.strategy, self.ctx
        staying_tokens = self.base_tokens + self.tokens_upto[end] - self.tokens_upto[self.at]
        staying_count = self.base_count + end - self.at
        forced = strategy.over_limit(staying_tokens, staying_count, ctx)
        due = (
            not strategy.jumps_at_limit_only
            and self._grown(max(self.at, self.last_eval), end) >= self.size
            and end - self.last_eval >= end // GEOMETRIC
        )
        if due:
            self.last_eval = end
            self.evaluated += 1
            jumped = self._rule(end)
            staying = self.base.messages_at(self.at, self.cut) + self.messages[self.at : end]
            if forced or self._pays(staying, staying_tokens, jumped):
                self._jump(end)
                self._set_rule(end, jumped)
                self.cut = None
                self.base_tokens, self.base_count = self._count(jumped), len(jumped)
                if strategy.over_limit(self.base_tokens, self.base_count, ctx):
                    self._cut(end, floor=0)
                return
        if forced:
            self._jump(end)
            self._cut(end, floor=self.cut.hi if self.cut is not None else 0)

    def _jump(self, end: int) -> None:
        self.jumps += 1
        self.at = end

    def _cut(self, end: int, floor: int) -> None:
        self.cuts += 1
        self.ctx.details.clear()
        self.cut = self.strategy.cut(self.base.prefix(end), floor, self.room, self.ctx)
        self.base_tokens, self.base_count = self.cut.tokens, self.cut.count
        if self.strategy.jumps_at_limit_only:
            self.details = dict(self.ctx.details)

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
