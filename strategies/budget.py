"""Token budgets shared by window, fit and middle_out: the default total, and a conversation in priced units."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .base import Context, Message
from .units import Unit, gather, pinned_units, split_units

# Held back from the context window: our counts follow OpenAI's cookbook estimate, providers add tokens of
# their own (and other tokenizers count differently), so a prompt sized to the last token may still be refused.
SAFETY_MARGIN_PERCENT = 2


def safety_margin(ctx: Context) -> int:
    return ctx.limits.context_window * SAFETY_MARGIN_PERCENT // 100


def default_total(ctx: Context, reserve: int | None = None) -> int:
    """Prompt tokens a request may have: the context window minus the output reserve and the safety margin."""
    if reserve is None:
        reserve = ctx.output_reserve()
    return max(0, ctx.limits.context_window - reserve - safety_margin(ctx))


@dataclass(frozen=True)
class Layout:
    """A conversation in units, with each unit's tokens and the units compaction must keep.

    The prompt tokens of any set of whole units are `overhead` plus their units' tokens, exactly what
    ctx.count_request gives for those messages: counts are per message, plus reply priming and tools.
    """

    messages: list[Message]
    units: list[Unit]
    pinned: frozenset[int]  # positions in `units`
    message_tokens: tuple[int, ...]  # per message
    tokens: tuple[int, ...]  # per unit
    overhead: int  # reply priming plus the tools definitions

    @classmethod
    def of(cls, messages: list[Message], ctx: Context) -> Layout:
        units = split_units(messages)
        pinned = frozenset(pinned_units(messages, units))
        per_message = tuple(ctx.count_message(m) for m in messages)
        per_unit = tuple(sum(per_message[i] for i in unit.indices) for unit in units)
        return cls(messages, units, pinned, per_message, per_unit, ctx.count_request([]))

    @property
    def removable(self) -> list[int]:
        """Positions of the units compaction may drop, oldest first."""
        return [p for p in range(len(self.units)) if p not in self.pinned]

    def cost(self, keep: Iterable[int]) -> int:
        """Prompt tokens of a request holding exactly these units."""
        return self.overhead + sum(self.tokens[p] for p in keep)

    def unit_of(self) -> dict[int, int]:
        """Message index -> position of its unit."""
        return {i: position for position, unit in enumerate(self.units) for i in unit.indices}

    def gather(self, keep: Iterable[int]) -> list[Message]:
        """The messages of these units, in their original order."""
        return gather(self.messages, self.units, set(keep))
