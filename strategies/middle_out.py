"""OpenRouter's middle-out transform, by whole units: drop from the middle until the prompt fits."""

from __future__ import annotations

from pydantic import Field

from .base import Context, Message
from .budget import default_total
from .epochs import EpochParams, EpochStrategy
from .layout import Cut, Layout, Prefix


class MiddleOutParams(EpochParams):
    budget: int | None = Field(
        None,
        ge=0,
        description="Prompt tokens of the whole request (messages, tools, reply priming) "
        "(default: the context window minus the output reserve and a 2% safety margin, as fit).",
    )
    max_messages: int | None = Field(
        None,
        ge=1,
        description="Most messages the request may have, e.g. 1000 for Anthropic models (default: no limit).",
    )
    epoch: int | None = Field(
        None,
        ge=0,
        description="Tokens of room a cut leaves below the budget (at most half of it; default: half): the cut is "
        "recomputed only when the request would pass the budget, so at most once per this many tokens of growth "
        "(0: on every request over the budget).",
    )


class MiddleOut(EpochStrategy[MiddleOutParams]):
    """While the request is over budget (or over max_messages), drop the non-pinned unit nearest the middle
    of the droppable range; the hole grows outwards, alternating sides, so about as many messages stay
    before it as after it. The start (the task, early decisions) and the end (the recent work) survive. In epochs
    (strategies.epochs): a jump fills the budget less one epoch (and max_messages less as large a share).
    """

    name = "middle_out"
    epoch_unit = "tokens"
    jumps_at_limit_only = True
    params_model = MiddleOutParams
    summary = "Drop whole units from the middle of the conversation until it fits the budget and message limit."

    def limit(self, ctx: Context) -> int:
        return self.params.budget if self.params.budget is not None else default_total(ctx)

    def epoch_size(self, ctx: Context) -> int:
        return self.params.epoch if self.params.epoch is not None else self.limit(ctx) // 2

    def over_limit(self, tokens: int, messages: int, ctx: Context) -> bool:
        return tokens > self.limit(ctx) or (
            self.params.max_messages is not None and messages > self.params.max_messages
        )

    def room(self, ctx: Context) -> int:
        return min(self.epoch_size(ctx), self.limit(ctx) // 2)

    def cut(self, prefix: Prefix, floor: int, room: int, ctx: Context) -> Cut:
        """Drops from the middle of the prefix itself, so `floor` (a fit-style cut's) does not apply."""
        p = self.params
        full = self.limit(ctx)
        budget = max(0, full - room)
        limit = prefix.end
        if p.max_messages is not None:
            limit = max(1, p.max_messages - (p.max_messages * room // full if full else 0))
        cut = middle_cut(prefix, budget, limit)
        ctx.report(budget=budget, dropped_units=prefix.removable_count() - cut.kept_units, overflow=cut.overflow)
        return cut

    def compact(self, messages: list[Message], ctx: Context) -> list[Message]:
        prefix = Layout.of(messages, ctx).prefix(len(messages))
        cut = self.cut(prefix, 0, 0, ctx)
        return prefix.gather(cut.lo, cut.hi)


def middle_cut(prefix: Prefix, budget: int, limit: int) -> Cut:
    """Keep the removable units farthest from the middle of the droppable range while the request stays within
    budget and limit messages, alternating ends: the same units stay as when the ones nearest the middle are
    dropped until it fits, found in time proportional to what is kept. The hole is one range of units.
    """
    starts = prefix.layout.starts
    tokens, count = prefix.pinned_tokens, prefix.pinned_count
    overflow = tokens > budget or count > limit
    left, right = prefix.oldest_removable(), prefix.newest_removable()
    if right < 0 or left > right:
        return Cut(0, 0, tokens, count, 0, overflow)
    # Twice the message position of the middle of the droppable range and of each unit: integers.
    middle = starts[left] + prefix.last_index(right)

    def distance(position: int) -> tuple[int, int]:
        return abs(starts[position] + prefix.last_index(position) - middle), starts[position]

    lo, hi, kept = left, right + 1, 0
    while left <= right:
        from_right = distance(right) > distance(left)
        position = right if from_right else left
        unit_tokens, unit_count = prefix.unit_tokens(position), prefix.unit_count(position)
        if tokens + unit_tokens > budget or count + unit_count > limit:
            return Cut(lo, hi, tokens, count, kept, overflow)
        tokens, count, kept = tokens + unit_tokens, count + unit_count, kept + 1
        if from_right:
            right = prefix.older(right)
            hi = right + 1
        else:
            left = prefix.newer(left)
            lo = left
    return Cut(0, 0, tokens, count, kept, overflow)  # everything fits
