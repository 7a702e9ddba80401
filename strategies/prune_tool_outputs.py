"""phronomy's ToolOutputPruner: every long tool result keeps its head and a note that it was cut."""

from __future__ import annotations

from pydantic import Field

from .base import Applied, Params, Strategy
from .context import Context
from .conversation import is_tool_result, message_text, with_message_text
from .markers import pruned
from .messages import Message


class PruneToolOutputsParams(Params):
    max_chars: int = Field(4000, ge=0, description="Characters of each tool result that are kept.")


class PruneToolOutputs(Strategy[PruneToolOutputsParams]):
    """Cuts every long tool result. Each is cut when it arrives and stays so, so the compacted prefix never
    changes: prefix-stable as it is, it needs no epochs (which would only keep the newest results whole for a
    while, at a price: docs/benchmarks.md).
    """

    name = "prune_tool_outputs"
    params_model = PruneToolOutputsParams
    summary = "Cut every tool result longer than max_chars to its first max_chars characters plus a note."

    def apply(self, messages: list[Message], ctx: Context) -> Applied:
        limit = self.params.max_chars
        out = list(messages)
        cut = 0
        for index, message in enumerate(messages):
            if not is_tool_result(message):
                continue
            ctx.checkpoint()
            text = message_text(message)
            if len(text) > limit:
                out[index] = with_message_text(message, pruned(text, limit))
                cut += 1
        return Applied(out, {"pruned": cut})
