"""OpenRouter's middle-out transform, by whole units: drop from the middle until the prompt fits."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import Applied, Params
from .budget import default_total, total_field
from .context import Context
from .epochs import EpochStrategy, room_field
from .layout import Cut, Layout, Prefix
from .messages import Message


class MiddleOutParams(Params):
    renamed = {"budget": "total", "epoch": "room"}
    total: int | None = total_field()
    max_messages: int | None = Field(
        None,
        ge=1,
        description="Most messages the request may have, e.g. 1000 for Anthropic models (default: no limit).",
    )
    room: int | None = room_field("the total")


class MiddleOut(EpochStrategy[MiddleOutParams]):
    """While the request is over its total (or over max_messages), drop the non-pinned unit nearest the middle
    of the droppable range; the hole grows outwards, alternating sides, so about as many messages stay
    before it as after it. The start (the task, early decisions) and the end (the recent work) survive.
    Cache-aware (strategies.epochs): a cut fills the total less `room` (and max_messages less as large a share).
    """

    name = "middle_out"
    jumps_at_limit_only = True
    params_model = MiddleOutParams
    summary = "Drop whole units from the middle of the conversation until it fits the total and message limit."

    def limit(self, ctx: Context) -> int:
        return self.params.total if self.params.total is not None else default_total(ctx)

    def over_limit(self, tokens: int, messages: int, ctx: Context) -> bool:
        return tokens > self.limit(ctx) or (
            self.params.max_messages is not None and messages > self.params.max_messages
        )

    def room(self, ctx: Context) -> int:
        half = self.limit(ctx) // 2
        return half if self.params.room is None else min(self.params.room, half)

    def cut(self, prefix: Prefix, floor: int, room: int, ctx: Context) -> Cut:
        """Drops from the middle of the prefix itself, so `floor` (a fit-style cut's) does not apply."""
        p = self.params
        full = self.limit(ctx)
        limit = prefix.end
        if p.max_messages is not None:
            limit = max(1, p.max_messages - (p.max_messages * room // full if full else 0))
        return middle_cut(prefix, max(0, full - room), limit)

    def cut_details(self, prefix: Prefix, cut: Cut, ctx: Context) -> dict[str, Any]:
        dropped = prefix.removable_count() - cut.kept_units
        return {"total": cut.total, "dropped_units": dropped, "overflow": cut.overflow}

    def compact(self, messages: list[Message], ctx: Context) -> Applied:
        prefix = Layout.of(messages, ctx).prefix(len(messages))
        cut = self.cut(prefix, 0, 0, ctx)
        return Applied(prefix.gather(cut.lo, cut.hi), self.cut_details(prefix, cut, ctx))


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
        return Cut(0, 0, tokens, count, 0, overflow, budget)
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
            return Cut(lo, hi, tokens, count, kept, overflow, budget)
        tokens, count, kept = tokens + unit_tokens, count + unit_count, kept + 1
        if from_right:
            right = prefix.older(right)
            hi = right + 1
        else:
            left = prefix.newer(left)
            lo = left
    return Cut(0, 0, tokens, count, kept, overflow, budget)  # everything fits
