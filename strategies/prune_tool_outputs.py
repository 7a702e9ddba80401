"""phronomy's ToolOutputPruner: every long tool result keeps its head and a note that it was cut."""

from __future__ import annotations

from pydantic import Field

from .base import Context, Message, Params, Strategy
from .content import is_tool_result, short_hash, text_of, with_text

NOTE = "\n[... output truncated ...]"


class PruneToolOutputsParams(Params):
    max_chars: int = Field(4000, ge=0, description="Characters of each tool result that are kept.")


def prune(text: str, max_chars: int) -> str:
    # The size and hash after the note let the model (and a human) tell what was removed.
    return f"{text[:max_chars]}{NOTE} ({len(text)} chars, sha256 {short_hash(text)})"


class PruneToolOutputs(Strategy[PruneToolOutputsParams]):
    name = "prune_tool_outputs"
    params_model = PruneToolOutputsParams
    summary = "Cut every tool result longer than max_chars to its first max_chars characters plus a note."

    def apply(self, messages: list[Message], ctx: Context) -> list[Message]:
        limit = self.params.max_chars
        out = list(messages)
        for index, message in enumerate(messages):
            if not is_tool_result(message):
                continue
            text = text_of(message.get("content"))
            if len(text) > limit:
                out[index] = {**message, "content": with_text(message.get("content"), prune(text, limit))}
        return out
