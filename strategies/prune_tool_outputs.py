"""phronomy's ToolOutputPruner: every long tool result keeps its head and a note that it was cut."""

from __future__ import annotations

from pydantic import Field

from .base import Applied, Params, Strategy
from .context import Context
from .conversation import rewrite_tool_results
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
    reversible = True
    params_model = PruneToolOutputsParams
    summary = "Cut every tool result longer than max_chars to its first max_chars characters plus a note."

    def apply(self, messages: list[Message], ctx: Context) -> Applied:
        limit = self.params.max_chars

        def cut(message: Message, text: str) -> str:
            return pruned(text, limit, ctx.ref_for(text)) if len(text) > limit else text

        out, pruned_results = rewrite_tool_results(messages, cut, ctx.checkpoint)
        return Applied(out, {"pruned": pruned_results})
