"""The input an answer reports, from the ends of its body, in three kinds and in total."""

from __future__ import annotations

import json

from app.upstream.models.usage import InputUsage, input_usage, usage_in_body
from tests.support.messages_upstream import message_events


def test_chat_responses_and_anthropic_prompt_tokens_are_the_total_of_the_input() -> None:
    chat = {"choices": [], "usage": {"prompt_tokens": 1200, "completion_tokens": 5, "total_tokens": 1205}}
    assert usage_total("chat.completions", json.dumps(chat).encode()) == 1200
    event = {"type": "response.completed", "response": {"usage": {"input_tokens": 900, "output_tokens": 2}}}
    assert usage_total("responses", f"event: response.completed\ndata: {json.dumps(event)}\n\n".encode()) == 900
    anthropic = {"usage": {"input_tokens": 10, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 3000}}
    assert usage_total("messages", json.dumps(anthropic).encode()) == 3210


def usage_total(wire: str, body: bytes) -> int | None:
    usage = usage_in_body(wire, body)
    return None if usage is None else usage.total


def test_a_key_inside_the_models_text_is_not_usage() -> None:
    answer = {"choices": [{"message": {"content": 'say {"usage": {"prompt_tokens": 5}}'}}]}
    assert usage_in_body("chat.completions", json.dumps(answer).encode()) is None
    assert usage_in_body("chat.completions", b"data: [DONE]\n\n") is None


def test_each_apis_usage_in_the_three_kinds() -> None:
    chat = {"prompt_tokens": 1200, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 1000}}
    assert input_usage("chat.completions", chat) == InputUsage(uncached=200, cache_read=1000)
    responses = {"input_tokens": 900, "input_tokens_details": {"cached_tokens": 512}, "output_tokens": 3}
    assert input_usage("responses", responses) == InputUsage(uncached=388, cache_read=512)
    # Anthropic's input_tokens leave the cache out: each kind is counted apart, and the total is their sum.
    messages = {"input_tokens": 10, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 3000}
    assert input_usage("messages", messages) == InputUsage(uncached=10, cache_read=3000, cache_write=200)
    assert input_usage("messages", messages).total == 3210


def test_usage_that_reports_no_input_or_nonsense_counts_no_more_than_it_can() -> None:
    assert input_usage("chat.completions", None) is None
    assert input_usage("chat.completions", {"completion_tokens": 5}) is None
    assert input_usage("messages", {"output_tokens": 7}) is None  # a message_delta without the input
    # Cached past the total (a broken upstream) is the total, never a negative uncached count.
    assert input_usage("responses", {"input_tokens": 5, "input_tokens_details": {"cached_tokens": 9}}) == InputUsage(
        0, 5, 0
    )
    assert input_usage("chat.completions", {"prompt_tokens": -3}) == InputUsage(0, 0, 0)
    assert input_usage("chat.completions", {"prompt_tokens": True}) is None


def test_the_usage_of_a_body_is_its_last_usage_object_with_input() -> None:
    chunk = {"choices": [], "usage": {"prompt_tokens": 70, "prompt_tokens_details": {"cached_tokens": 20}}}
    stream = b"data: " + json.dumps({"usage": None}).encode() + b"\n\ndata: " + json.dumps(chunk).encode()
    assert usage_in_body("chat.completions", stream + b"\n\ndata: [DONE]\n\n") == InputUsage(50, 20, 0)
    quoted = {"choices": [{"message": {"content": 'say "usage": {"prompt_tokens": 5}'}}]}
    assert usage_in_body("chat.completions", json.dumps(quoted).encode()) is None
    answer = {
        "content": [],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 4, "cache_read_input_tokens": 96, "output_tokens": 9},
    }
    events = b"".join(message_events(answer))
    # message_start says the input, message_delta only the output: the input is message_start's.
    assert usage_in_body("messages", events) == InputUsage(4, 96, 0)
