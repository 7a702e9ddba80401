"""scout-ai's three-tier policy: newest tool interactions whole, a middle band truncated, the oldest dropped."""

from __future__ import annotations

from pydantic import Field

from .base import Applied, Params
from .context import Context
from .conversation import CallIndex, ToolPair, find_pairs, remove_pairs, text_of, with_arguments, with_text
from .epochs import EpochStrategy, epoch_field, min_gain_field, pace_field
from .markers import shorten_arguments, truncate_middle
from .messages import Message


class ShortenToolsParams(Params):
    epoch: int = epoch_field()
    min_gain: float = min_gain_field()
    pace: bool = pace_field()
    full_tool_calls: int = Field(0, ge=0, description="Newest tool calls whose arguments are never shortened.")
    full_tool_outputs: int = Field(10, ge=0, description="Newest tool results that are never shortened.")
    max_tool_calls: int = Field(40, ge=0, description="Tool calls kept at all; older ones go with their results.")
    max_tool_outputs: int | None = Field(
        None, ge=0, description="Tool results kept at all (default: max_tool_calls); older ones go with their calls."
    )
    max_tool_chars: int = Field(
        100_000, ge=0, description="Characters of tool traffic, newest first, kept whole before any tier applies."
    )
    short_string_length: int = Field(
        200, ge=1, description="Length argument strings are cut to; results are cut to twice this."
    )


class ShortenTools(EpochStrategy[ShortenToolsParams]):
    """Walks tool interactions newest first. While the characters seen stay under max_tool_chars nothing
    is touched; past that, the newest full_* are kept, those up to max_* are truncated with a
    hash-stamped marker, and older ones are dropped, each call together with its result. In epochs of
    `epoch` tool calls, a jump taken only when it pays (min_gain; strategies.epochs), as scout-ai's
    shorten_tools_epoch; past the model's window between epochs, the oldest whole units go.
    """

    name = "shorten_tools"
    reversible = True
    params_model = ShortenToolsParams
    summary = "Keep the newest tool results whole, truncate a middle band, drop the oldest (pairs stay intact)."

    def epoch_calls(self) -> int:
        return self.params.epoch

    def min_gain(self) -> float:
        return self.params.min_gain

    def pace(self) -> bool:
        return self.params.pace

    def compact(self, messages: list[Message], ctx: Context) -> Applied:
        p = self.params
        max_outputs = p.max_tool_outputs if p.max_tool_outputs is not None else p.max_tool_calls
        seen_chars = 0
        dropped: list[ToolPair] = []
        results: dict[int, str] = {}
        arguments: dict[int, dict[str | None, str]] = {}
        calls = CallIndex()
        for rank, pair in enumerate(reversed(find_pairs(messages)), start=1):
            ctx.checkpoint()
            under_budget = seen_chars < p.max_tool_chars
            keep_output = under_budget or rank <= p.full_tool_outputs
            keep_call = under_budget or rank <= p.full_tool_calls
            if (not keep_output and rank > max_outputs) or (not keep_call and rank > p.max_tool_calls):
                dropped.append(pair)
                continue
            text = text_of(messages[pair.result_index].get("content"))
            args = calls.arguments(messages[pair.call_index], pair.call_id) or ""
            if not keep_output:
                shortened = truncate_middle(text, 2 * p.short_string_length, ctx.ref_for(text))
                if shortened != text:
                    results[pair.result_index] = text = shortened
            if not keep_call:
                shortened = shorten_arguments(args, p.short_string_length, ctx.ref_for)
                if shortened != args:
                    arguments.setdefault(pair.call_index, {})[pair.call_id] = args = shortened
            seen_chars += len(text) + len(args)

        out = list(messages)
        for index, text in results.items():
            out[index] = {**out[index], "content": with_text(out[index].get("content"), text)}
        for index, new_args in arguments.items():
            out[index] = with_arguments(out[index], new_args)
        return Applied(remove_pairs(out, dropped))
