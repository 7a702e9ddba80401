"""phronomy's ToolOutputPruner: every long tool result keeps its head and a note that it was cut."""

from __future__ import annotations

from pydantic import Field

from .base import Context, Message
from .content import is_tool_result, short_hash, text_of, with_text
from .epochs import BreakEvenParams, EpochStrategy, epoch_field, min_gain_field

NOTE = "\n[... output truncated ...]"


class PruneToolOutputsParams(BreakEvenParams):
    max_chars: int = Field(4000, ge=0, description="Characters of each tool result that are kept.")
    # Each result is cut when it arrives and stays so: the compacted prefix never changes, and epochs would only
    # keep the newest results whole for a while, at a price (docs/benchmarks.md, epochs table).
    epoch: int | None = epoch_field(0, "tool_calls")
    min_gain: float = min_gain_field(0.0)


def prune(text: str, max_chars: int) -> str:
    # The size and hash after the note let the model (and a human) tell what was removed.
    return f"{text[:max_chars]}{NOTE} ({len(text)} chars, sha256 {short_hash(text)})"


class PruneToolOutputs(EpochStrategy[PruneToolOutputsParams]):
    """Cuts every long tool result. With epochs (strategies.epochs) the results of the calls since the last
    jump stay whole until the next.
    """

    name = "prune_tool_outputs"
    params_model = PruneToolOutputsParams
    summary = "Cut every tool result longer than max_chars to its first max_chars characters plus a note."

    def compact(self, messages: list[Message], ctx: Context) -> list[Message]:
        limit = self.params.max_chars
        out = list(messages)
        for index, message in enumerate(messages):
            if not is_tool_result(message):
                continue
            ctx.checkpoint()
            text = text_of(message.get("content"))
            if len(text) > limit:
                out[index] = {**message, "content": with_text(message.get("content"), prune(text, limit))}
        return out
