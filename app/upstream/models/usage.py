"""The prompt tokens an upstream's answer reports (its `usage`), read from the end of the relayed body: chat
completions' `prompt_tokens`, the Responses API's and Anthropic's `input_tokens` (Anthropic's cached input
besides), in a JSON body or the last events of a stream.
"""

from __future__ import annotations

import re

# Usage comes at the end of a body or stream: this much of its end is kept to read it from.
TAIL_BYTES = 16 * 1024
# Not preceded by a backslash: a key quoted inside a string (the model's own text) is escaped.
_PROMPT = re.compile(rb'(?<!\\)"(prompt_tokens|input_tokens)"\s*:\s*(\d{1,9})\b')
_CACHED = re.compile(rb'(?<!\\)"(cache_creation_input_tokens|cache_read_input_tokens)"\s*:\s*(\d{1,9})\b')


def prompt_tokens(tail: bytes) -> int | None:
    """The last prompt-token count in the body's tail, or None when it reports none."""
    found = list(_PROMPT.finditer(tail))
    if not found:
        return None
    last = found[-1]
    # Anthropic's input_tokens leave out what the prompt cache read or wrote; the same usage object names those.
    cached = sum(int(m.group(2)) for m in _CACHED.finditer(tail, last.start() - 512 if last.start() > 512 else 0))
    return int(last.group(2)) + cached
