"""The input an upstream's answer reports (its `usage`), read from the ends of the relayed body (a JSON body, the last
events of a stream or a Messages stream's first) or from a usage object: for the savings ledger, in three kinds every
API can be put in (`uncached`, read at the full price; `cache_read`, served by the provider's prompt cache, at a
discount; `cache_write`, written to it, at Anthropic's premium, which OpenAI reports none of), and for calibration,
their total: the prompt's size as the upstream counted it.

chat completions: prompt_tokens, of which prompt_tokens_details.cached_tokens were read from the cache; Responses:
input_tokens, of which input_tokens_details.cached_tokens; Messages: input_tokens (never what the cache read or
wrote), cache_read_input_tokens and cache_creation_input_tokens, each apart.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# Usage comes at the end of a body or stream: this much of its end is kept to read it from, and this much of its
# start, where a Messages stream reports its input (message_start).
TAIL_BYTES = 16 * 1024
HEAD_BYTES = 4 * 1024
KINDS = ("uncached", "cache_read", "cache_write")
# Every count is at most this: a reported usage past it is no usage (a body that merely looks like one).
MAX_COUNT = 10**9
# The "usage" key of a JSON object; not preceded by a backslash: a key quoted inside a string (the model's own text)
# is escaped there.
_USAGE_KEY = re.compile(rb'(?<!\\)"usage"\s*:\s*\{')
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class InputUsage:
    uncached: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def total(self) -> int:
        return self.uncached + self.cache_read + self.cache_write

    def by_kind(self) -> dict[str, int]:
        return {"uncached": self.uncached, "cache_read": self.cache_read, "cache_write": self.cache_write}


def _count(value: Any) -> int:
    return value if type(value) is int and 0 <= value <= MAX_COUNT else 0


def input_usage(wire: str, usage: Any) -> InputUsage | None:
    """A usage object of the wire format named `wire`, in the three kinds; None when it reports no input."""
    if not isinstance(usage, dict):
        return None
    if wire == "messages":
        if type(usage.get("input_tokens")) is not int:
            return None
        return InputUsage(
            _count(usage.get("input_tokens")),
            _count(usage.get("cache_read_input_tokens")),
            _count(usage.get("cache_creation_input_tokens")),
        )
    total_key, details_key = (
        ("prompt_tokens", "prompt_tokens_details")
        if wire == "chat.completions"
        else ("input_tokens", "input_tokens_details")
    )
    if type(usage.get(total_key)) is not int:
        return None
    total = _count(usage.get(total_key))
    details = usage.get(details_key)
    cached = min(total, _count(details.get("cached_tokens"))) if isinstance(details, dict) else 0
    return InputUsage(total - cached, cached, 0)


def usage_in_body(wire: str, body: bytes) -> InputUsage | None:
    """The usage the end of an answer reports (a JSON body, or the last events of a stream): of the usage objects in
    it, the last that reports input. A stream of Messages reports input in its first event (message_start) and may
    repeat it, counted to the end, in its message_delta: the last one that holds input_tokens is the whole count.
    """
    found: InputUsage | None = None
    for match in _USAGE_KEY.finditer(body):
        start = match.end() - 1
        try:
            value, _ = _DECODER.raw_decode(body[start : start + 4096].decode("utf-8", "replace"))
        except ValueError:
            continue  # cut off by the head or tail the relay kept, or not JSON after all
        usage = input_usage(wire, value)
        if usage is not None:
            found = usage
    return found
