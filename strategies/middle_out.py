"""OpenRouter's middle-out transform, by whole units: drop from the middle until the prompt fits."""

from __future__ import annotations

from pydantic import Field

from .base import Context, Message, Params, Strategy
from .budget import Layout, default_total


class MiddleOutParams(Params):
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


class MiddleOut(Strategy[MiddleOutParams]):
    """While the request is over budget (or over max_messages), drop the non-pinned unit nearest the middle
    of the droppable range; the hole grows outwards, alternating sides, so about as many messages stay
    before it as after it. The start (the task, early decisions) and the end (the recent work) survive.
    """

    name = "middle_out"
    params_model = MiddleOutParams
    summary = "Drop whole units from the middle of the conversation until it fits the budget and message limit."

    def apply(self, messages: list[Message], ctx: Context) -> list[Message]:
        p = self.params
        budget = p.budget if p.budget is not None else default_total(ctx)
        limit = p.max_messages if p.max_messages is not None else len(messages)
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
