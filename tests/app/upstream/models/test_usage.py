"""The prompt tokens an answer reports, from the end of its body."""

from __future__ import annotations

import json

from app.upstream.models.usage import prompt_tokens


def test_chat_responses_and_anthropic_usage() -> None:
    chat = {"choices": [], "usage": {"prompt_tokens": 1200, "completion_tokens": 5, "total_tokens": 1205}}
    assert prompt_tokens(json.dumps(chat).encode()) == 1200
    event = {"type": "response.completed", "response": {"usage": {"input_tokens": 900, "output_tokens": 2}}}
    assert prompt_tokens(f"event: response.completed\ndata: {json.dumps(event)}\n\n".encode()) == 900
    anthropic = {"usage": {"input_tokens": 10, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 3000}}
    assert prompt_tokens(json.dumps(anthropic).encode()) == 3210


def test_a_key_inside_the_models_text_is_not_usage() -> None:
    answer = {"choices": [{"message": {"content": 'say {"prompt_tokens": 5}'}}]}
    assert prompt_tokens(json.dumps(answer).encode()) is None
    assert prompt_tokens(b"data: [DONE]\n\n") is None
