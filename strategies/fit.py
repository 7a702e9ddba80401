"""The recipe's assembly step: the pinned messages, then as many of the newest whole units as fit a total."""

from __future__ import annotations

from pydantic import Field

from .base import Context, Message
from .budget import default_total
from .epochs import EpochParams, EpochStrategy
from .layout import Cut, Layout, Prefix, fit_cut


class FitParams(EpochParams):
    total: int | None = Field(
        None,
        ge=0,
        description="Prompt tokens of the whole request (messages, tools, reply priming) "
        "(default: the context window minus the output reserve and a 2% safety margin).",
    )
    reserve: int | None = Field(
        None,
        ge=0,
        description="Tokens kept free for the answer when total is not set; ignored when it is "
        "(default: the request's max_completion_tokens / max_tokens, else the model's max output, "
        "at most half the context window).",
    )
    epoch: int | None = Field(
        None,
        ge=0,
        description="Tokens of room a cut leaves below the total (at most half of it; default: half): the cut is "
        "recomputed only when the request would pass the total, so at most once per this many tokens of growth "
        "(0: on every request over the total).",
    )


class Fit(EpochStrategy[FitParams]):
    """Pinned units always go in; then non-pinned units newest first while the request stays within total,
    stopping at the first that does not fit, so what is dropped is one block of the oldest. In epochs
    (strategies.epochs): a jump fills total less one epoch, so the next epoch's messages fit.
    """

    name = "fit"
    epoch_unit = "tokens"
    jumps_at_limit_only = True
    params_model = FitParams
    summary = "Keep the pinned messages and the newest whole units that fit the request into a token total."

    def limit(self, ctx: Context) -> int:
        p = self.params
        return p.total if p.total is not None else default_total(ctx, p.reserve)

    def epoch_size(self, ctx: Context) -> int:
        return self.params.epoch if self.params.epoch is not None else self.limit(ctx) // 2

    def room(self, ctx: Context) -> int:
        return min(self.epoch_size(ctx), self.limit(ctx) // 2)

    def cut(self, prefix: Prefix, floor: int, room: int, ctx: Context) -> Cut:
        total = max(0, self.limit(ctx) - room)
        cut = fit_cut(prefix, total, floor)
        dropped = prefix.removable_count() - cut.kept_units
        ctx.report(total=total, kept_units=cut.kept_units, dropped_units=dropped, overflow=cut.overflow)
        return cut

    def compact(self, messages: list[Message], ctx: Context) -> list[Message]:
        prefix = Layout.of(messages, ctx).prefix(len(messages))
        cut = self.cut(prefix, 0, 0, ctx)
        return prefix.gather(cut.lo, cut.hi)
