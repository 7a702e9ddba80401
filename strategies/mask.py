"""Observation masking, reversible: the newest tool results whole, older ones a one-line stub with a ref.

Masking old tool output is the first move the research recommends for agent loops (keep the newest M results:
The Complexity Trap, 2025), and a stub with a ref loses nothing: the model gets any result back with the expand
tool (strategies.refs). The boundary moves in epochs (strategies.epochs), so the provider's cached prefix breaks
once per `epoch` tool calls at most, and only when the tokens freed pay for it.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from .base import CHAIN, Applied, Params
from .chain_syntax import fallback_chain
from .context import Context
from .conversation import CallIndex, find_pairs, message_text, with_message_text
from .epochs import EpochStrategy, epoch_field, min_gain_field
from .markers import elided, truncate_middle
from .messages import Message
from .unavailable import Unavailable


class MaskParams(Params):
    keep: int = Field(10, ge=0, description="Newest tool results kept whole; older ones become stubs with a ref.")
    epoch: int = epoch_field()
    min_gain: float = min_gain_field()
    max_chars: int | None = Field(
        None,
        ge=1,
        description="Also cut every tool result longer than this, on arrival, to its head and tail around a stub "
        "with a ref (default: results stay whole until they are masked).",
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
    request's prefix changes). Where the request cannot be offered the expand tool, its fallback chain runs
    instead (dedupe: lossless).
    """

    name = "mask"
    reversible = True
    params_model = MaskParams
    summary = "Replace all but the newest tool results by one-line stubs the model can expand (ref)."

    def epoch_calls(self) -> int:
        return self.params.epoch

    def min_gain(self) -> float:
        return self.params.min_gain

    def compact(self, messages: list[Message], ctx: Context) -> Applied:
        pairs = find_pairs(messages)
        old = pairs[: max(0, len(pairs) - self.params.keep)]
        out = list(messages)
        masked = 0
        calls = CallIndex()
        for pair in old:
            ctx.checkpoint()
            result = messages[pair.result_index]
            text = message_text(result)
            stub = elided(calls.name(messages[pair.call_index], pair.call_id), text, ctx.ref_for(text))
            if len(stub) < len(text):
                out[pair.result_index] = with_message_text(result, stub)
                masked += 1
        return Applied(out, {"masked": masked})

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
