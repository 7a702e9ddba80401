"""The jump points of a conversation, found by replaying its request ends (strategies.epochs explains epochs,
the break-even rule, limits and the bounds on the work). Stateless: every request of a conversation, on any
replica, finds the same ones; with a Memo, it resumes where the previous request of the conversation left off.
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel

from .base import Applied
from .context import Context
from .conversation import is_assistant, tool_calls_of
from .digests import prefix_digests
from .layout import Cut, Layout, Prefix
from .messages import Message
from .refs import stub_refs

# The rule is evaluated again only after the conversation grew by 1/GEOMETRIC of its messages.
GEOMETRIC = 8
# The pace rule's prices, relative to uncached input: Anthropic's cache write and read. Its break-even ratio
# (CACHE_WRITE - CACHE_READ) / (CACHE_WRITE + k CACHE_READ) is above OpenAI's (0.5 / (1 + 0.5 k)) for every k, so a
# jump that pays at these prices pays at OpenAI's too (strategies.epochs).
CACHE_WRITE = 1.25
CACHE_READ = 0.1


class Jumping(Protocol):
    """What the replay needs of a strategy (strategies.epochs.EpochStrategy)."""

    name: ClassVar[str]
    reversible: ClassVar[bool]
    jumps_at_limit_only: ClassVar[bool]
    rule_fits_limit: ClassVar[bool]

    @property
    def params(self) -> BaseModel: ...

    def compact(self, messages: list[Message], ctx: Context) -> Applied: ...

    def cut(self, prefix: Prefix, floor: int, room: int, ctx: Context) -> Cut: ...

    def cut_details(self, prefix: Prefix, cut: Cut, ctx: Context) -> dict[str, Any]: ...

    def limit(self, ctx: Context) -> int: ...

    def room(self, ctx: Context) -> int: ...

    def epoch_calls(self) -> int: ...

    def min_gain(self) -> float: ...

    def pace(self) -> bool: ...

    def over_limit(self, tokens: int, messages: int, ctx: Context) -> bool: ...


def answered_at(messages: list[Message]) -> list[int]:
    """Where the model answered (every assistant message after the first message): the lengths of the
    requests a client sent before this one.
    """
    return [c for c in range(1, len(messages)) if is_assistant(messages[c])]


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


class Replay:
    def __init__(self, strategy: Jumping, messages: list[Message], ctx: Context) -> None:
        self.strategy = strategy
        self.messages = messages
        self.ctx = ctx
        self.size = strategy.epoch_calls()
        tokens = [0]
        calls = [0]
        for message in messages:
            ctx.checkpoint()
            tokens.append(tokens[-1] + ctx.count_message(message))
            calls.append(calls[-1] + (len(tool_calls_of(message)) if is_assistant(message) else 0))
        self.tokens_upto = tokens  # tokens of messages[:i]
        self.calls_upto = calls
        self.overhead = ctx.count_request([])
        self.room = strategy.room(ctx)
        self.jumps = self.evaluated = self.cuts = 0
        self.details: dict[str, Any] = {}
        # The state, also what the memo keeps: the last jump point, the rule's last jump, the last cut's range
        # and the last position the rule was evaluated at.
        self.at = self.rule_end = self.last_eval = 0
        self.cut: Cut | None = None
        self.base = _Base(messages, [], 0, ctx)
        self.base_tokens, self.base_count = self.overhead, 0

    def run(self) -> Applied:
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
        for position in range(start, len(ends)):
            self.ctx.checkpoint()
            self._step(ends[position], position + 1)
        if start == len(ends):
            # The same request again (a retry, a dry run), its state remembered. The counts may have changed since
            # (the calibration learns from every answer), and a state under the limit then may be over it now: the
            # last step again, which only acts if it is. Not a replay from the start at the new counts: that could
            # find other jump points, and break the prefix the provider cached.
            self._step(ends[-1], len(ends))
        if memo is not None and keys:
            memo.put(keys[-1], self._state())
        details = {
            **self.details,
            "epoch_boundary": self.at,
            "epoch_tail": len(self.messages) - self.at,
            "jumps": self.jumps,
            "evaluated": self.evaluated,
            "limit_cuts": self.cuts,
        }
        return Applied(self.base.messages_at(self.at, self.cut) + self.messages[self.at :], details)

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
                "epochs-v4",
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
        """The rule over the first `end` messages; what it found out is kept for the stats."""
        applied = self.strategy.compact(self.messages[:end], self.ctx)
        self.details = dict(applied.details)
        return applied.messages

    def _set_rule(self, end: int, out: list[Message]) -> None:
        self.rule_end = end
        self.base = _Base(self.messages, out, end, self.ctx)

    def _count(self, messages: list[Message]) -> int:
        return self.overhead + sum(self.ctx.count_message(m) for m in messages)

    def _step(self, end: int, requests: int) -> None:
        """requests: how many requests the conversation has sent, this one included."""
        strategy, ctx = self.strategy, self.ctx
        staying_tokens = self.base_tokens + self.tokens_upto[end] - self.tokens_upto[self.at]
        staying_count = self.base_count + end - self.at
        forced = strategy.over_limit(staying_tokens, staying_count, ctx)
        since = max(self.at, self.last_eval)
        due = (
            not strategy.jumps_at_limit_only
            and self.calls_upto[end] - self.calls_upto[since] >= self.size
            and end - self.last_eval >= end // GEOMETRIC
        ) or (forced and strategy.rule_fits_limit)
        if due:
            self.last_eval = end
            self.evaluated += 1
            jumped = self._rule(end)
            staying = self.base.messages_at(self.at, self.cut) + self.messages[self.at : end]
            if forced or self._pays(staying, staying_tokens, jumped, requests):
                self._jump(end)
                self._set_rule(end, jumped)
                self.cut = None
                self.base_tokens, self.base_count = self._count(jumped), len(jumped)
                # A rule that fits the limit itself went as far as the pinned messages let it; a cut would only
                # drop what it kept on purpose (the newest tool result).
                if strategy.over_limit(self.base_tokens, self.base_count, ctx) and not strategy.rule_fits_limit:
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
        prefix = self.base.prefix(end)
        self.cut = self.strategy.cut(prefix, floor, self.room, self.ctx)
        self.base_tokens, self.base_count = self.cut.tokens, self.cut.count
        if self.strategy.jumps_at_limit_only:
            self.details = self.strategy.cut_details(prefix, self.cut, self.ctx)

    def _pays(self, staying: list[Message], staying_tokens: int, jumped: list[Message], requests: int) -> bool:
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
        if removed <= 0 or removed < self.strategy.min_gain() * rewritten:
            return False
        if self.strategy.reversible and _first_stub(staying, jumped):
            # The proxy offers the expand tool from the first stub with a ref on: the tools, which come before every
            # message, change, so the provider caches nothing of this request (strategies.epochs).
            rewritten = staying_tokens
            if removed < self.strategy.min_gain() * rewritten:
                return False
        if not self.strategy.pace():
            return True
        # Pace: the session is expected to run about as many more requests as it has run (Lindy), and each of them
        # reads `removed` tokens fewer from the cache; that must pay for the rewrite.
        return removed * (CACHE_WRITE + requests * CACHE_READ) >= rewritten * (CACHE_WRITE - CACHE_READ)


def _first_stub(staying: list[Message], jumped: list[Message]) -> bool:
    """Whether the jump brings the first stub with a ref into a request that had none."""
    return next(stub_refs(jumped), None) is not None and next(stub_refs(staying), None) is None
