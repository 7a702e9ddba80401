"""OpenRouter's middle-out transform, by whole units: drop from the middle until the prompt fits."""

from __future__ import annotations

from pydantic import Field

from .base import Context, Message
from .budget import Layout, default_total
from .epochs import EpochParams, EpochStrategy


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

    def compact(self, messages: list[Message], ctx: Context, room: int) -> list[Message]:
        p = self.params
        full = self.limit(ctx)
        budget = max(0, full - room)
        limit = len(messages)
        if p.max_messages is not None:
            limit = max(1, p.max_messages - (p.max_messages * room // full if full else 0))
        layout = Layout.of(messages, ctx)
        keep = set(range(len(layout.units)))
        tokens, count = layout.cost(keep), len(messages)
        removable = layout.removable
        if removable:
            # Twice the message position of the middle of the droppable range and of each unit: integers.
            middle = layout.units[removable[0]].start + layout.units[removable[-1]].indices[-1]

            def distance(position: int) -> tuple[int, int]:
                unit = layout.units[position]
                return abs(unit.start + unit.indices[-1] - middle), unit.start

            for position in sorted(removable, key=distance):
                if tokens <= budget and count <= limit:
                    break
                keep.discard(position)
                tokens -= layout.tokens[position]
                count -= len(layout.units[position].indices)
        dropped = len(layout.units) - len(keep)
        ctx.report(budget=budget, dropped_units=dropped, overflow=tokens > budget or count > limit)
        return list(messages) if not dropped else layout.gather(keep)
