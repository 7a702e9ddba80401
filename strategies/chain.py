"""Run a chain of strategies over a request's messages, measuring each step."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .base import Context, Message, Strategy
from .chain_syntax import format_chain, parse_chain
from .registry import Registry


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
    # Set when a step could not do its work and ran a fallback instead (it reports `fallback=reason`).
    fallback: str | None = None


@dataclass(frozen=True)
class Chain:
    steps: tuple[Strategy[Any], ...]
    spec: str  # the chain as it ran, with the parameters the request set

    @classmethod
    def parse(cls, text: str, registry: Registry, configured: Mapping[str, Mapping[str, Any]] | None = None) -> Chain:
        """Build from a header or config value. Raises ChainSyntaxError or StrategyError."""
        specs = parse_chain(text)
        configured = configured or {}
        steps = tuple(registry.build(s, configured.get(s.name)) for s in specs)
        return cls(steps, format_chain(specs))

    def run(self, messages: list[Message], ctx: Context, *, trace: bool = False) -> ChainResult:
        """Apply every step in order. With trace, count tokens after each step for the stats."""
        tokens_before = ctx.count_request(messages)
        current = messages
        steps: list[StepStats] = []
        tokens = tokens_before
        fallback: str | None = None
        for step in self.steps:
            ctx.checkpoint()
            ctx.details.clear()
            started = time.perf_counter()
            current = step.apply(current, ctx)
            ms = (time.perf_counter() - started) * 1000
            reason = ctx.details.get("fallback")
            if isinstance(reason, str):
                fallback = reason
            if trace:
                after = ctx.count_request(current)
                steps.append(StepStats(step.name, tokens, after, round(ms, 3), dict(ctx.details)))
                tokens = after
        if not trace and current is not messages:
            tokens = ctx.count_request(current)
        return ChainResult(current, tokens_before, tokens, steps, fallback)
