"""Token budgets: what the context window leaves for a request, and for the turns window and notes keep."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from pydantic import Field

from .context import Context
from .layout import Layout

# What the default budget leaves for the last user message when it is not yet known how long the next one
# is: a question up to this share of the context window leaves the budget (and so every cut point) unchanged.
QUESTION_ALLOWANCE_PERCENT = 5


# The parameters, one meaning each: `total` is the whole request, `budget` the kept turns (what the pinned
# messages leave), `low_water` the share of the budget a cut leaves the kept turns at.
def total_field() -> Any:
    return Field(
        None,
        ge=0,
        description="Prompt tokens of the whole request (messages, tools, reply priming) "
        "(default: the context window minus the output reserve and the safety margin, 2% unless configured).",
    )


def budget_field(default: str) -> Any:
    return Field(None, ge=0, description=f"Tokens the kept non-pinned units may take (default: {default}).")


def low_water_field(what: str, one: str) -> Any:
    return Field(
        0.5,
        gt=0,
        le=1,
        description=f"Once the kept units outgrow budget, the oldest are {what} until they take at most "
        f"budget * low_water tokens (1: {one}).",
    )


def safety_margin(ctx: Context) -> int:
    """Held back from the context window (ctx.safety_margin_percent of it): our counts follow OpenAI's cookbook
    estimate, calibrated or not, providers add tokens of their own, so a prompt sized to the last token may still be
    refused.
    """
    return int(ctx.limits.context_window * ctx.safety_margin_percent / 100)


def default_total(ctx: Context, reserve: int | None = None) -> int:
    """Prompt tokens a request may have: the context window minus the output reserve and the safety margin."""
    if reserve is None:
        reserve = ctx.output_reserve()
    return max(0, ctx.limits.context_window - reserve - safety_margin(ctx))


def question_allowance(ctx: Context) -> int:
    """What the default kept-turns budget leaves for a last user message shorter than this (default_budget)."""
    return ctx.limits.context_window * QUESTION_ALLOWANCE_PERCENT // 100


def window_total(ctx: Context) -> int:
    """The most prompt tokens a request may have for window's default budget to keep every unit of it: the default
    total less the question allowance (a question longer than that is counted in both). A strategy before window
    that keeps its request within this is never undone by window's cut, which goes to half its budget.
    """
    return max(0, default_total(ctx) - question_allowance(ctx))


# Windows up to this many tokens get a quarter of the limit as room, larger ones half (growth_room).
SMALL_WINDOW = 32_768


def growth_room(ctx: Context, limit: int) -> int:
    """Tokens a degradation (mask: strategies.degrade) leaves free below `limit` for the growth until the next one.
    Measured (python -m bench.room, docs/strategies.md#room-for-growth): on windows of 2k to 16k, a quarter keeps
    8 to 14 points more of an agent's results in view than half, for a prefix cache recomputing 1.3 to 1.6 times
    the tokens; an eighth adds 4 to 6 points more at 1.3 to 1.5 times that again. Larger windows keep half: there
    a prefix read again costs the most, and the benchmark's default-chain figures were measured with it.
    """
    return limit // 4 if ctx.limits.context_window <= SMALL_WINDOW else limit // 2


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
    allowance = question_allowance(ctx)
    budget = max(0, total - layout.cost(steady) - max(sum(layout.tokens[q] for q in question), allowance))
    return budget, layout.cost(steady | question) > total


def turns_budget(
    layout: Layout, budget: int | None, ctx: Context, held_back: int = 0
) -> tuple[frozenset[int], frozenset[int], int, dict[str, Any]]:
    """The steady units, the question's unit, the kept turns' budget (the given one, else default_budget less
    held_back, e.g. room for the notes) and what to report of it.
    """
    steady, question = steady_and_question(layout)
    details: dict[str, Any] = {}
    if budget is None:
        budget, details["overflow"] = default_budget(layout, steady, question, ctx)
        budget = max(0, budget - held_back)
    return steady, question, budget, details


class KeptTurns:
    """The walk window and notes share: every unit but the steady ones goes, message by message, into a kept part
    in conversation order; whenever the kept part passes the budget, the caller takes its oldest whole units out
    (take_oldest), which stay out, their messages still to come included. Walking a whole request is exactly
    walking its earlier requests first, so every request of a conversation finds the same cut points.
    """

    def __init__(self, layout: Layout, steady: frozenset[int]) -> None:
        self.layout = layout
        self.steady = steady
        self.kept: deque[int] = deque()
        self.unit_tokens: dict[int, int] = {}  # each kept unit's messages walked so far
        self.taken: set[int] = set()
        self.total = 0

    def walk(self, budget: int, over: Callable[[int], None], checkpoint: Callable[[], None]) -> None:
        """over(index) whenever the kept part passes budget, at the message it passes it with."""
        unit_of = self.layout.unit_of()
        for index, tokens in enumerate(self.layout.message_tokens):
            checkpoint()
            position = unit_of[index]
            if position in self.steady or position in self.taken:
                continue
            if position not in self.unit_tokens:
                self.kept.append(position)
                self.unit_tokens[position] = 0
            self.unit_tokens[position] += tokens
            self.total += tokens
            if self.total > budget:
                over(index)

    def take_oldest(self) -> tuple[int, int]:
        """The oldest kept unit, out of the kept part, with its tokens."""
        position = self.kept.popleft()
        tokens = self.unit_tokens.pop(position)
        self.total -= tokens
        self.taken.add(position)
        return position, tokens
