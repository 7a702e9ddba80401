"""Token budgets: what the context window leaves for a request, and for the turns window and notes keep."""

from __future__ import annotations

from .context import Context
from .layout import Layout

# Held back from the context window: our counts follow OpenAI's cookbook estimate, providers add tokens of
# their own (and other tokenizers count differently), so a prompt sized to the last token may still be refused.
SAFETY_MARGIN_PERCENT = 2
# What the default budget leaves for the last user message when it is not yet known how long the next one
# is: a question up to this share of the context window leaves the budget (and so every cut point) unchanged.
QUESTION_ALLOWANCE_PERCENT = 5


def safety_margin(ctx: Context) -> int:
    return ctx.limits.context_window * SAFETY_MARGIN_PERCENT // 100


def default_total(ctx: Context, reserve: int | None = None) -> int:
    """Prompt tokens a request may have: the context window minus the output reserve and the safety margin."""
    if reserve is None:
        reserve = ctx.output_reserve()
    return max(0, ctx.limits.context_window - reserve - safety_margin(ctx))


def steady_and_question(layout: Layout) -> tuple[frozenset[int], frozenset[int]]:
    """Units pinned for the whole conversation (system/developer messages and the first unit), and the unit of
    the last user message, which is pinned only until the next user message arrives and so is walked too.
    """
    unit_of = layout.unit_of()
    users = layout.users
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
