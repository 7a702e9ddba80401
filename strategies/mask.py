"""Observation masking, reversible: the newest tool results whole, older ones a one-line stub with a ref.

Masking old tool output is the first move the research recommends for agent loops (keep the newest M results:
The Complexity Trap, 2025), and a stub with a ref loses nothing: the model gets any result back with the expand
tool (strategies.refs). The boundary moves in epochs (strategies.epochs), so the provider's cached prefix breaks
once per `epoch` tool calls at most, and only when the tokens freed pay for it.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from .base import CHAIN, Applied, Params
from .budget import growth_room, window_total
from .chain_syntax import fallback_chain
from .context import Context
from .conversation import find_pairs, message_text, with_message_text
from .degrade import Inputs, fit_masked
from .epochs import EpochStrategy, epoch_field, min_gain_field, pace_field
from .markers import truncate_middle
from .messages import Message
from .unavailable import Unavailable


class MaskParams(Params):
    keep: int = Field(10, ge=0, description="Newest tool results kept whole; older ones become stubs with a ref.")
    epoch: int = epoch_field()
    min_gain: float = min_gain_field()
    pace: bool = pace_field()
    room: int | None = Field(
        None,
        ge=0,
        description="Tokens a request that passed the limit is brought below it by (at most half the limit; "
        "default: strategies.budget.growth_room, which scales with the window): the request is degraded again only "
        "once it has grown by this much.",
    )
    max_chars: int | None = Field(
        None,
        ge=1,
        description="Also cut every tool result longer than this, on arrival, to its head and tail around a stub "
        "with a ref (default: results stay whole until they are masked).",
    )
    inputs: bool = Field(
        False,
        description="Also mask what the model wrote, on the same jumps: the long strings in the arguments of the calls "
        "whose results are stubs (a file written whole, a long script) cut head and tail around a stub with a ref, the "
        "arguments staying valid JSON, and old assistant texts longer than text_chars (those before the turn of the "
        "oldest of the newest keep calls; never the latest assistant turn or a pinned message).",
    )
    text_chars: int = Field(
        500,
        ge=1,
        description="With inputs: an old assistant text longer than this keeps this many characters, head and tail, "
        "around a stub with a ref.",
    )
    fallback: str = Field(
        "dedupe",
        min_length=1,
        description="Chain run instead where the model cannot be offered the expand tool (another wire format, "
        "n > 1, the tool switched off): masking without a way back would lose what the stubs stand for.",
        json_schema_extra=CHAIN,
    )

    @field_validator("fallback")
    @classmethod
    def _a_chain_without_masking(cls, value: str) -> str:
        return fallback_chain(value, "mask")


class Mask(EpochStrategy[MaskParams]):
    """All tool results but the newest `keep` become `[<tool> output elided: N chars; call compaction_expand with
    ref="..." to see it]`; each keeps its role and tool_call_id, each call stays, so no pair is broken. Between
    jumps the newest results stay whole, so up to `keep` + `epoch` of them are. With max_chars, results that are
    not masked are cut to their head and tail on arrival (each once, the same way on every request, so no earlier
    request's prefix changes). With inputs, the same jumps also cut what the model wrote: the long strings in the
    masked calls' arguments and old assistant texts (strategies.degrade). A request that would pass the limit (what
    window's default budget keeps: budget.window_total) jumps there and degrades in order to the limit less the room
    (strategies.degrade): more stubs, old calls' arguments shortened, fewer results whole, then the oldest units left
    out behind one stub with a ref. Where the request cannot be offered the expand tool, its fallback chain runs
    instead (dedupe: lossless).
    """

    name = "mask"
    reversible = True
    rule_fits_limit = True
    params_model = MaskParams
    summary = "Replace all but the newest tool results by one-line stubs the model can expand (ref)."

    def limit(self, ctx: Context) -> int:
        # What window (after mask in the default chain) keeps whole: a request mask fits is not cut again there.
        return window_total(ctx)

    def room(self, ctx: Context) -> int:
        limit = self.limit(ctx)
        room = growth_room(ctx, limit) if self.params.room is None else self.params.room
        return min(room, limit // 2)

    def epoch_calls(self) -> int:
        return self.params.epoch

    def min_gain(self) -> float:
        return self.params.min_gain

    def pace(self) -> bool:
        return self.params.pace

    def compact(self, messages: list[Message], ctx: Context) -> Applied:
        limit = self.limit(ctx)
        inputs = Inputs(self.params.text_chars) if self.params.inputs else None
        return fit_masked(messages, ctx, self.params.keep, limit, max(0, limit - self.room(ctx)), inputs)

    def fallback(self) -> str:
        return self.params.fallback

    def apply(self, messages: list[Message], ctx: Context) -> Applied:
        if not ctx.expandable:
            raise Unavailable("not_expandable", "the expand tool cannot be offered on this request")
        applied = super().apply(messages, ctx)
        limit = self.params.max_chars
        if limit is None:
            return applied
        out = list(applied.messages)
        cut = 0
        for pair in find_pairs(out):
            ctx.checkpoint()
            result = out[pair.result_index]
            # A stub is shorter than any useful max_chars, and truncate_middle never makes text longer.
            text = message_text(result)
            shortened = truncate_middle(text, limit, ctx.ref_for(text))
            if shortened != text:
                out[pair.result_index] = with_message_text(result, shortened)
                cut += 1
        return Applied(out, {**applied.details, "cut": cut})
