"""A tool result identical to an earlier one becomes a pointer to that first copy.

Agents re-read the same file and re-run the same command; the second copy tells the model nothing new.
The first copy always stays and each decision depends only on the messages up to the result itself, so
the output is append-only: the compacted request n is a byte-identical prefix of the compacted request
n + 1, and the provider's prompt cache keeps matching.
"""

from __future__ import annotations

from collections import Counter

from pydantic import Field

from .base import Context, Message, Params, Strategy
from .content import short_hash, text_of, with_text


class DedupeParams(Params):
    min_chars: int = Field(
        200, ge=0, description="Tool results shorter than this many characters are never replaced by a pointer."
    )


def pointer(call_id: str, text: str) -> str:
    return f"[same output as tool call {call_id} above: {len(text)} chars, sha256 {short_hash(text)}]"


class Dedupe(Strategy[DedupeParams]):
    """Only `tool` messages take part: a legacy `function` result has no call id to point at.

    The pointer names the first copy by its call id, so it is written only while that id is unambiguous:
    when some model reuses ids (call_0 every turn) and another result above also answers the first copy's
    id, or the duplicate answers that same id, the duplicate stays whole.
    """

    name = "dedupe"
    params_model = DedupeParams
    summary = "Replace a tool result identical to an earlier one by a pointer to the first copy's call id."

    def apply(self, messages: list[Message], ctx: Context) -> list[Message]:
        out = list(messages)
        first: dict[str, str] = {}  # text -> call id of its first copy
        answered: Counter[str] = Counter()  # call id -> tool results so far that answer it
        for index, message in enumerate(messages):
            call_id = message.get("tool_call_id")
            if message.get("role") != "tool" or not isinstance(call_id, str):
                continue
            answered[call_id] += 1
            ctx.checkpoint()
            text = text_of(message.get("content"))
            if len(text) < self.params.min_chars:
                continue
            if text not in first:
                first[text] = call_id
                continue
            original = first[text]
            if answered[original] != 1:  # also when this duplicate answers the same id
                continue
            short = pointer(original, text)
            if len(short) < len(text):
                out[index] = {**message, "content": with_text(message.get("content"), short)}
        return out
