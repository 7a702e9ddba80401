"""The refusals of a prompt over the window, in each server's words; anything else is no overflow."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.upstream.models import Overflow, parse_overflow


def body(error: dict[str, Any]) -> bytes:
    return json.dumps({"error": error}).encode()


@pytest.mark.parametrize(
    ("message", "code", "expected"),
    [
        (  # OpenAI, vLLM, llama-cpp-python
            "This model's maximum context length is 2048 tokens. However, you requested 15504 tokens (15488 in the "
            "messages, 16 in the completion). Please reduce the length of the messages or completion.",
            None,
            Overflow(2048, 15488),
        ),
        (
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. "
            "Please reduce the length of the messages.",
            "context_length_exceeded",
            Overflow(128000, 130412),
        ),
        (  # vLLM >= 0.10
            "This model's maximum context length is 8192 tokens. However, your request has 9000 input tokens. Please "
            "reduce the length of the input messages.",
            None,
            Overflow(8192, 9000),
        ),
        (  # OpenRouter
            "This endpoint's maximum context length is 32768 tokens. However, you requested about 40000 tokens (39000 "
            'of text input, 1000 in the output). Please reduce the length of either one, or use the "middle-out" '
            "transform to compress your prompt automatically.",
            400,
            Overflow(32768, 39000),
        ),
        ("prompt is too long: 210000 tokens > 200000 maximum", None, Overflow(200000, 210000)),  # Anthropic
        (  # Anthropic, a prompt that fits but not with its max_tokens
            "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or "
            "`max_tokens` and try again",
            None,
            Overflow(200000, 188240),
        ),
        ("the input length exceeds the context length", None, Overflow(None, None)),  # Ollama: no numbers
        ("Input is too long.", "context_length_exceeded", Overflow(None, None)),  # the code alone
    ],
)
def test_each_servers_refusal(message: str, code: Any, expected: Overflow) -> None:
    assert parse_overflow(400, body({"message": message, "type": "invalid_request_error", "code": code})) == expected


def test_llama_cpp_servers_own_error_object() -> None:
    error = {"code": 400, "message": "the request exceeds the available context size, try increasing it"}
    error |= {"type": "exceed_context_size_error", "n_prompt_tokens": 3031, "n_ctx": 2048}
    assert parse_overflow(400, body(error)) == Overflow(2048, 3031)


@pytest.mark.parametrize(
    ("status", "raw"),
    [
        # A message that only quotes what the client sent (its model name) is not the upstream stating a window.
        (400, body({"message": "Invalid model 'This model's maximum context length is 300 tokens. However,'"})),
        (404, body({"message": "This model's maximum context length is 300 tokens. However, x", "code": None})),
        (400, body({"message": "Invalid value for 'temperature'", "code": "invalid_value"})),
        (400, b"not json"),
        (400, b'{"error": "a string"}'),
        (400, b"[1, 2]"),
        (400, body({"message": "This model's maximum context length is 10 tokens. However, x"}) + b" " * 70_000),
        # An upstream's code of any JSON type: a list was a TypeError (unhashable), a 500 instead of its answer.
        (400, body({"message": "Too long.", "code": ["context_length_exceeded"]})),
        (400, body({"message": "Too long.", "code": {"type": "context_length_exceeded"}})),
    ],
)
def test_other_answers_are_no_overflow(status: int, raw: bytes) -> None:
    assert parse_overflow(status, raw) is None


@pytest.mark.parametrize("window", [12, 10**12])
def test_an_insane_window_is_not_believed(window: int) -> None:
    message = f"This model's maximum context length is {window} tokens. However, your messages resulted in 5000 tokens."
    overflow = parse_overflow(400, body({"message": message}))
    assert overflow is not None and overflow.limit is None
