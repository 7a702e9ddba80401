"""A tool result identical to an earlier one becomes a pointer to that first copy.

Agents re-read the same file and re-run the same command; the second copy tells the model nothing new.
The first copy always stays and each decision depends only on the messages up to the result itself, so
the output is append-only: the compacted request n is a byte-identical prefix of the compacted request
n + 1, and the provider's prompt cache keeps matching.
"""

from __future__ import annotations

from collections import Counter

from pydantic import Field

from .base import Applied, Params, Strategy
from .context import Context
from .conversation import message_text, result_id, with_message_text
from .markers import same_as
from .messages import Message


class DedupeParams(Params):
    min_chars: int = Field(
        200, ge=0, description="Tool results shorter than this many characters are never replaced by a pointer."
    )


class Dedupe(Strategy[DedupeParams]):
    """Only `tool` messages take part: a legacy `function` result has no call id to point at.

    The pointer names the first copy by its call id, so it is written only while that id is unambiguous:
    when some model reuses ids (call_0 every turn) and another result above also answers the first copy's
    id, or the duplicate answers that same id, the duplicate stays whole.
    """

    name = "dedupe"
    reversible = True
    params_model = DedupeParams
    summary = "Replace a tool result identical to an earlier one by a pointer to the first copy's call id."

    def apply(self, messages: list[Message], ctx: Context) -> Applied:
        out = list(messages)
        first: dict[str, str] = {}  # text -> call id of its first copy
        answered: Counter[str] = Counter()  # call id -> tool results so far that answer it
        pointers = 0
        for index, message in enumerate(messages):
            call_id = result_id(message)
            if call_id is None:
                continue
            answered[call_id] += 1
            ctx.checkpoint()
            text = message_text(message)
            if len(text) < self.params.min_chars:
                continue
            if text not in first:
                first[text] = call_id
                continue
            original = first[text]
            if answered[original] != 1:  # also when this duplicate answers the same id
                continue
            short = same_as(original, text, ctx.ref_for(text))
            if len(short) < len(text):
                out[index] = with_message_text(message, short)
                pointers += 1
        return Applied(out, {"pointers": pointers})
