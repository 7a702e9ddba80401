"""The recipe's kept turns: the newest whole units within a token budget, cut back in steps (hysteresis).

A boundary that moves with every new message re-bills the whole prefix after it at the provider. Here the
cut point moves only when the kept part outgrows the budget, and then far enough back (to budget *
low_water) that many later requests fit before it moves again. Without state: the cut points are found
by walking the conversation from its start, so every request of a conversation finds the same ones.
"""

from __future__ import annotations

from collections import deque

from pydantic import Field

from .base import Applied, Params, Strategy
from .budget import default_budget, steady_and_question
from .context import Context
from .layout import Layout
from .messages import Message


class WindowParams(Params):
    budget: int | None = Field(
        None,
        ge=0,
        description="Tokens the kept non-pinned units may take (default: fit's default total minus the tools, "
        "the system/developer messages, the first unit and room for the last user message).",
    )
    low_water: float = Field(
        0.5,
        gt=0,
        le=1,
        description="When the kept units outgrow budget, the oldest are cut until they take at most "
        "budget * low_water (1: a sliding window that moves with every request).",
    )


class Window(Strategy[WindowParams]):
    """Pinned units always go in. Every other unit is walked in conversation order, message by message, into
    a kept part; whenever the kept part exceeds budget, its oldest whole units are cut until it is at most
    budget * low_water. The result is the pinned units plus what is kept at the end of the walk.

    The unit of the last user message takes part in the walk like any other (and is forwarded even if
    the walk cut it), so the walk of a request is exactly the start of the next request's walk, and
    consecutive requests share their compacted prefix byte for byte until the next cut. Its cuts come in
    steps of budget * (1 - low_water), which pay for the cache under both price models (docs/benchmarks.md):
    it needs no epochs.
    """

    name = "window"
    params_model = WindowParams
    summary = "Keep the newest whole units within a token budget, cutting back to budget * low_water (cache-aware)."

    def apply(self, messages: list[Message], ctx: Context) -> Applied:
        layout = Layout.of(messages, ctx)
        unit_of = layout.unit_of()
        steady, question = steady_and_question(layout)

        budget = self.params.budget
        details: dict[str, bool] = {}
        if budget is None:
            budget, details["overflow"] = default_budget(layout, steady, question, ctx)
        low = int(budget * self.params.low_water)

        kept: deque[int] = deque()
        unit_tokens: dict[int, int] = {}  # each kept unit's messages replayed so far
        total_kept = cuts = 0
        cut: set[int] = set()
        for index, tokens in enumerate(layout.message_tokens):
            ctx.checkpoint()
            position = unit_of[index]
            if position in steady or position in cut:  # a unit is cut whole, also its messages still to come
                continue
            if position not in unit_tokens:
                kept.append(position)
                unit_tokens[position] = 0
            unit_tokens[position] += tokens
            total_kept += tokens
            if total_kept > budget:
                cuts += 1
                while total_kept > low:
                    oldest = kept.popleft()
                    total_kept -= unit_tokens.pop(oldest)
                    cut.add(oldest)

        kept_units, cut_units = len(set(kept) - question), len(cut - question)
        report = {"budget": budget, "kept_units": kept_units, "cut_units": cut_units, "cuts": cuts, **details}
        if not cut_units:
            return Applied(list(messages), report)
        return Applied(layout.gather(steady | question | set(kept)), report)
