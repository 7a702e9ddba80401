"""An upstream's answer that the prompt did not fit: OpenAI's `context_length_exceeded` and the messages vLLM,
llama.cpp, Ollama, OpenRouter and Anthropic send, with the limit (and the prompt's real size) they state.

Only the upstream's own words count: a pattern must open the error message (a message that merely quotes the
client, "model 'This model's maximum context length is 10 tokens' not found", opens otherwise), and numbers out of
a sane range are ignored.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# A context window outside this range is not one any real model has: not believed.
MIN_WINDOW = 256
MAX_WINDOW = 100_000_000
# Error bodies are small; a longer 400 body is not read for this.
MAX_ERROR_BYTES = 64 * 1024

_N = r"(\d[\d,]*)"
# Each pattern is matched at the start of the error message; `limit` is the window, `prompt` the prompt's tokens.
_PATTERNS = (
    # OpenAI, vLLM, llama-cpp-python: "This model's maximum context length is 2048 tokens. However, you requested
    # 3036 tokens (3031 in the messages, 5 in the completion)." / "However, your messages resulted in 3031 tokens."
    # / (vLLM >= 0.10) "However, your request has 3031 input tokens."
    re.compile(
        rf"This model's maximum context length is {_N} tokens\. However, (?:you requested {_N} tokens \({_N} in the "
        rf"messages|your messages resulted in {_N} tokens|your request has {_N} input tokens)?"
    ),
    # OpenRouter: "This endpoint's maximum context length is 2048 tokens. However, you requested about 3036 tokens
    # (3031 of text input, 5 in the output)."
    re.compile(
        rf"This endpoint's maximum context length is {_N} tokens\. However, (?:you requested about {_N} tokens \({_N} "
        r"of text input)?"
    ),
    # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum", and for a prompt that fits but not with its
    # answer: "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or
    # `max_tokens` and try again"
    re.compile(r"prompt is too long: (?P<prompt>\d+) tokens > (?P<limit>\d[\d,]*) maximum"),
    re.compile(r"input length and `max_tokens` exceed context limit: (?P<prompt>\d+) \+ \d+ > (?P<limit>\d[\d,]*)"),
    # Ollama: "the input length exceeds the context length" (no numbers), and llama.cpp's server below.
)
_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error", "string_above_max_length"})


@dataclass(frozen=True)
class Overflow:
    """The upstream refused a prompt as too long. limit: the window it stated (None: it did not say);
    prompt_tokens: the prompt's size by the upstream's own tokenizer (None: not stated)."""

    limit: int | None
    prompt_tokens: int | None


def _number(text: str | None) -> int | None:
    if not text:
        return None
    value = int(text.replace(",", ""))
    return value if 0 < value <= MAX_WINDOW * 10 else None


def _window(value: Any) -> int | None:
    return value if type(value) is int and MIN_WINDOW <= value <= MAX_WINDOW else None


def parse_overflow(status: int, body: bytes) -> Overflow | None:
    """The overflow a 400 answer's body states, or None when it is another error (or not one of these shapes)."""
    if status not in (400, 413) or len(body) > MAX_ERROR_BYTES:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None
    message = error.get("message")
    message = message if isinstance(message, str) else ""
    # llama.cpp's server: {"code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": N, "n_ctx": M}
    if error.get("type") == "exceed_context_size_error":
        prompt = error.get("n_prompt_tokens")
        return Overflow(_window(error.get("n_ctx")), prompt if type(prompt) is int and prompt > 0 else None)
    for pattern in _PATTERNS:
        found = pattern.match(message)
        if found is None:
            continue
        numbers = [g for g in found.groups()]
        if pattern.groupindex:  # Anthropic's: named, the prompt before the limit
            prompt, limit = _number(found.group("prompt")), _number(found.group("limit"))
        else:
            limit = _number(numbers[0])
            stated = [_number(n) for n in numbers[1:]]
            # "you requested N tokens (M in the messages": M is the prompt; the other forms state only the prompt.
            prompt = stated[1] if stated[0] is not None else next((n for n in stated[2:] if n is not None), None)
        return Overflow(_window(limit), prompt)
    code = error.get("code")  # the upstream's, of any JSON type: a list would be unhashable
    if (isinstance(code, str) and code in _CODES) or message.startswith(
        ("the input length exceeds the context length", "the request exceeds the available context size")
    ):
        return Overflow(None, None)
    return None
