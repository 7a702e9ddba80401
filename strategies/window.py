"""The recipe's kept turns: the newest whole units within a token budget, cut back in steps (hysteresis).

A boundary that moves with every new message re-bills the whole prefix after it at the provider. Here the
cut point moves only when the kept part outgrows the budget, and then far enough back (to budget *
low_water) that many later requests fit before it moves again. Without state: the cut points are found
by replaying the conversation from its start, so every request of a conversation finds the same ones.
"""

from __future__ import annotations

from collections import deque

from pydantic import Field

from .base import Context, Message
from .budget import default_total
from .epochs import BreakEvenParams, EpochStrategy, epoch_field, min_gain_field
from .layout import Layout

# What the default budget leaves for the last user message when it is not yet known how long the next one
# is: a question up to this share of the context window leaves the budget (and so every cut point) unchanged.
QUESTION_ALLOWANCE_PERCENT = 5


class WindowParams(BreakEvenParams):
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
    # Its cuts already come in steps of budget * (1 - low_water), each removing half the kept part by default,
    # which pays for the cache under both price models: no further epoch or break-even test by default.
    epoch: int | None = epoch_field(0, "tokens")
    min_gain: float = min_gain_field(0.0)


class Window(EpochStrategy[WindowParams]):
    """Pinned units always go in. Every other unit is replayed in conversation order, message by message, into
    a kept part; whenever the kept part exceeds budget, its oldest whole units are cut until it is at most
    budget * low_water. The result is the pinned units plus what is kept at the end of the replay.

    The unit of the last user message takes part in the replay like any other (and is forwarded even if
    the replay cut it), so the replay of a request is exactly the start of the next request's replay, and
    consecutive requests share their compacted prefix byte for byte until the next cut.
    """

    name = "window"
    epoch_unit = "tokens"
    params_model = WindowParams
    summary = "Keep the newest whole units within a token budget, cutting back to budget * low_water (cache-aware)."

    def compact(self, messages: list[Message], ctx: Context) -> list[Message]:
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
        ctx.report(budget=budget, kept_units=kept_units, cut_units=cut_units, cuts=cuts, **details)
        if not cut_units:
            return list(messages)
        return layout.gather(steady | question | set(kept))


def steady_and_question(layout: Layout) -> tuple[frozenset[int], frozenset[int]]:
    """Units pinned for the whole conversation (system/developer messages and the first unit), and the unit of
    the last user message, which is pinned only until the next user message arrives and so is replayed too.
    """
    messages = layout.messages
    unit_of = layout.unit_of()
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    first, last = (unit_of[users[0]], unit_of[users[-1]]) if users else (None, None)
    steady = layout.pinned if last is None or last == first else layout.pinned - {last}
    question = frozenset({last}) if last is not None and last not in steady else frozenset()
    return steady, question


def default_budget(layout: Layout, steady: frozenset[int], question: frozenset[int], ctx: Context) -> tuple[int, bool]:
    """The kept units' budget when none is given: fit's default total less the tools, the steady units and room
    for the question (its own size, or QUESTION_ALLOWANCE_PERCENT of the window if that is more); and whether
    the steady units and the question alone overflow that total.
    """
    total = default_total(ctx)
    allowance = ctx.limits.context_window * QUESTION_ALLOWANCE_PERCENT // 100
    budget = max(0, total - layout.cost(steady) - max(sum(layout.tokens[q] for q in question), allowance))
    return budget, layout.cost(steady | question) > total
