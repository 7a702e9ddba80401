"""Run a chain of strategies over a request's messages, measuring each step; a step that cannot do its work
(strategies.unavailable) is replaced by its fallback chain, whose steps are measured like the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .base import Strategy
from .chain_syntax import format_chain, parse_chain
from .context import Context
from .messages import Message
from .registry import Registry
from .unavailable import Unavailable

# Called after each step that ran (a fallback chain's too) with its name, the messages it got and those it returned.
Watch = Callable[[str, list[Message], list[Message]], None]


@dataclass(frozen=True)
class StepStats:
    strategy: str
    tokens_before: int
    tokens_after: int
    ms: float
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChainResult:
    messages: list[Message]
    tokens_before: int
    tokens_after: int
    steps: list[StepStats] = field(default_factory=list)
    # Set when a step could not do its work and its fallback chain ran instead: the step's reason.
    fallback: str | None = None


@dataclass(frozen=True)
class Chain:
    steps: tuple[Strategy[Any], ...]
    spec: str  # the chain as it ran, with the parameters the request set
    # Per step, the chain run when it raises Unavailable; None: the step has none.
    fallbacks: tuple[Chain | None, ...] = ()

    @classmethod
    def parse(cls, text: str, registry: Registry, configured: Mapping[str, Mapping[str, Any]] | None = None) -> Chain:
        """Build from a header or config value. Raises ChainSyntaxError or StrategyError."""
        specs = parse_chain(text)
        configured = configured or {}
        steps = tuple(registry.build(s, configured.get(s.name)) for s in specs)
        fallbacks = tuple(
            cls.parse(fallback, registry, configured) if (fallback := step.fallback()) is not None else None
            for step in steps
        )
        return cls(steps, format_chain(specs), fallbacks)

    def every_step(self) -> Iterator[Strategy[Any]]:
        """The steps, and those of their fallback chains, depth first."""
        yield from self.steps
        for fallback in self.fallbacks:
            if fallback is not None:
                yield from fallback.every_step()

    @property
    def uses_summariser(self) -> bool:
        """Whether a step, or a fallback, needs the Context's summariser and notes cache."""
        return any(step.uses_summariser for step in self.every_step())

    @property
    def reversible(self) -> bool:
        """Whether a step, or a fallback, writes stubs with refs the expand tool resolves."""
        return any(step.reversible for step in self.every_step())

    def run(
        self, messages: list[Message], ctx: Context, *, trace: bool = False, watch: Watch | None = None
    ) -> ChainResult:
        """Apply every step in order. With trace, count tokens after each step for the stats; watch: sees each step's
        messages in and out (strategies.diff follows each message through the chain with it).
        """
        tokens_before = ctx.count_request(messages)
        current = messages
        steps: list[StepStats] = []
        tokens = tokens_before
        fallback: str | None = None
        for step, step_fallback in zip(self.steps, self.fallbacks or [None] * len(self.steps), strict=True):
            ctx.checkpoint()
            started = time.perf_counter()
            try:
                applied = step.apply(current, ctx)
                if watch is not None:
                    watch(step.name, current, applied.messages)
                current, details = applied.messages, dict(applied.details)
            except Unavailable as exc:
                if step_fallback is None:
                    raise
                fallback = exc.reason
                details = {**exc.details, "fallback": exc.reason, "fallback_detail": exc.detail}
                details["fallback_chain"] = step_fallback.spec
                instead = step_fallback.run(current, ctx, trace=trace, watch=watch)
                current = instead.messages
                if trace:  # the step itself, then each step of its fallback chain, as they ran
                    steps.append(StepStats(step.name, tokens, tokens, _ms(started), details))
                    steps.extend(instead.steps)
                    tokens = instead.tokens_after
                continue
            if trace:
                after = ctx.count_request(current)
                steps.append(StepStats(step.name, tokens, after, _ms(started), details))
                tokens = after
        if not trace and current is not messages:
            tokens = ctx.count_request(current)
        return ChainResult(current, tokens_before, tokens, steps, fallback)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
