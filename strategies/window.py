"""The recipe's kept turns: the newest whole units within a token budget, cut back in steps (hysteresis).

A boundary that moves with every new message re-bills the whole prefix after it at the provider. Here the
cut point moves only when the kept part outgrows the budget, and then far enough back (to budget *
low_water) that many later requests fit before it moves again. Without state: the cut points are found
by walking the conversation from its start, so every request of a conversation finds the same ones.
"""

from __future__ import annotations

from .base import Applied, Params, Strategy
from .budget import KeptTurns, budget_field, low_water_field, turns_budget
from .context import Context
from .layout import Layout
from .messages import Message


class WindowParams(Params):
    budget: int | None = budget_field(
        "fit's default total less the tools, the system/developer messages, the first unit and room for the last "
        "user message"
    )
    low_water: float = low_water_field("cut", "a sliding window that moves with every request")


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
        steady, question, budget, details = turns_budget(layout, self.params.budget, ctx)
        low = int(budget * self.params.low_water)

        turns = KeptTurns(layout, steady)
        cuts = 0

        def cut(index: int) -> None:
            nonlocal cuts
            cuts += 1
            while turns.total > low:
                turns.take_oldest()

        turns.walk(budget, cut, ctx.checkpoint)
        kept, cut_positions = turns.kept, turns.taken
        kept_units, cut_units = len(set(kept) - question), len(cut_positions - question)
        report = {"budget": budget, "kept_units": kept_units, "cut_units": cut_units, "cuts": cuts, **details}
        if not cut_units:
            return Applied(list(messages), report)
        return Applied(layout.gather(steady | question | set(kept)), report)
