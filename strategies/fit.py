"""The recipe's assembly step: the pinned messages, then as many of the newest whole units as fit a total."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import Applied, Params
from .budget import default_total, total_field
from .context import Context
from .epochs import EpochStrategy, room_field
from .layout import Cut, Layout, Prefix, fit_cut
from .messages import Message


class FitParams(Params):
    renamed = {"epoch": "room"}
    total: int | None = total_field()
    reserve: int | None = Field(
        None,
        ge=0,
        description="Tokens kept free for the answer when total is not set; ignored when it is "
        "(default: the request's max_completion_tokens / max_tokens, else the model's max output, "
        "at most half the context window).",
    )
    room: int | None = room_field("the total")


class Fit(EpochStrategy[FitParams]):
    """Pinned units always go in; then non-pinned units newest first while the request stays within total,
    stopping at the first that does not fit, so what is dropped is one block of the oldest. Cache-aware
    (strategies.epochs): the cut is recomputed only when the request would pass the total, and then fills the
    total less `room`, so the messages of the next requests fit.
    """

    name = "fit"
    jumps_at_limit_only = True
    params_model = FitParams
    summary = "Keep the pinned messages and the newest whole units that fit the request into a token total."

    def limit(self, ctx: Context) -> int:
        p = self.params
        return p.total if p.total is not None else default_total(ctx, p.reserve)

    def room(self, ctx: Context) -> int:
        half = self.limit(ctx) // 2
        return half if self.params.room is None else min(self.params.room, half)

    def cut(self, prefix: Prefix, floor: int, room: int, ctx: Context) -> Cut:
        return fit_cut(prefix, max(0, self.limit(ctx) - room), floor)

    def cut_details(self, prefix: Prefix, cut: Cut, ctx: Context) -> dict[str, Any]:
        dropped = prefix.removable_count() - cut.kept_units
        return {"total": cut.total, "kept_units": cut.kept_units, "dropped_units": dropped, "overflow": cut.overflow}

    def compact(self, messages: list[Message], ctx: Context) -> Applied:
        prefix = Layout.of(messages, ctx).prefix(len(messages))
        cut = self.cut(prefix, 0, 0, ctx)
        return Applied(prefix.gather(cut.lo, cut.hi), self.cut_details(prefix, cut, ctx))
