"""The proxy on loopback, driven by the official openai SDK, against the stand-in upstream."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from strategies.invariants import pairing_problems
from tests.factories import agent_loop, result, tool_call, user
from tests.support.servers import LoopbackServer
from tests.support.upstream import Behaviour, StandInUpstream


def test_agent_conversation_past_the_window_is_forwarded_within_it(
    client: openai.OpenAI, upstream: StandInUpstream
) -> None:
    messages = agent_loop(200, output_chars=4000)
    upstream.behaviour = Behaviour(context_window=128_000)  # gpt-4o's, and its own tokenizer to count with

    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages)
    completion = raw.parse()

    sent = upstream.last().json()["messages"]
    assert completion.choices[0].message.content == f"seen {len(sent)} messages"
    assert raw.headers["x-compaction-strategies"] == "minify,mask,window"  # the default chain
    before = int(raw.headers["x-compaction-tokens-before"])
    after = int(raw.headers["x-compaction-tokens-after"])
    assert before > 128_000 > 112_000 > after  # gpt-4o's window, less the output reserve of 16k
    # What the upstream counted itself: in the window with room for the answer, taken at once, not after a refusal.
    assert "x-compaction-retried" not in raw.headers
    assert upstream.last().prompt_tokens is not None and upstream.last().prompt_tokens < 112_000
    assert after < before / 2
    assert len(json.dumps(sent)) < len(json.dumps(messages)) / 2
    assert pairing_problems(sent) == []
    assert sent[:2] == messages[:2]
    assert sent[-2:] == messages[-2:]  # the newest tool interaction is whole


def test_unknown_fields_and_credentials_are_forwarded(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    client = openai.OpenAI(
        base_url=f"{proxy.url}/v1", api_key="sk-test-key", organization="org-abc", project="proj_xyz", max_retries=0
    )
    client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "hi"}],
        temperature=0.25,
        extra_body={"vendor_option": {"nested": [1, 2.5, None]}, "prompt_cache_key": "conv-1"},
        extra_headers={"X-Compaction-Strategies": "none", "X-Compaction-Debug": "1", "X-Custom": "kept"},
    )
    received = upstream.last()
    body = received.json()
    assert body["vendor_option"] == {"nested": [1, 2.5, None]}
    assert body["prompt_cache_key"] == "conv-1"
    assert body["temperature"] == 0.25
    assert received.headers["authorization"] == "Bearer sk-test-key"
    assert received.headers["openai-organization"] == "org-abc"
    assert received.headers["openai-project"] == "proj_xyz"
    assert received.headers["x-custom"] == "kept"
    assert not [h for h in received.headers if h.startswith("x-compaction-")]
    assert received.path == "/v1/chat/completions"


def test_streaming_relays_every_chunk_with_usage(client: openai.OpenAI, upstream: StandInUpstream) -> None:
    stream = client.chat.completions.create(
        model="gpt-4o",
        messages=agent_loop(3, output_chars=100),
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello world"
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens == 2 and usage.total_tokens == usage.prompt_tokens + 2
    assert upstream.last().json()["stream"] is True


def test_stream_bytes_are_relayed_unchanged(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    body = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    direct = httpx.post(f"{upstream.url}/v1/chat/completions", json=body)  # type: ignore[attr-defined]
    via_proxy = httpx.post(f"{proxy.url}/v1/chat/completions", json=body)

    assert via_proxy.status_code == 200
    assert via_proxy.content == direct.content
    assert via_proxy.content.endswith(b"data: [DONE]\n\n")
    assert via_proxy.headers["content-type"].startswith("text/event-stream")


def test_stream_is_not_buffered(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    # The upstream holds the rest of the stream until the first chunk has reached the client: a proxy that
    # buffered would deliver nothing and time out.
    upstream.stream_gate.clear()
    body = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", json=body, timeout=10) as response:
        chunks = response.iter_raw()
        first = next(chunks)
        assert b'"role": "assistant"' in first
        upstream.stream_gate.set()
        rest = b"".join(chunks)
    assert rest.endswith(b"data: [DONE]\n\n")


def test_client_disconnect_closes_the_upstream_stream(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    upstream.stream_gate.clear()
    body = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", json=body, timeout=10) as response:
        next(response.iter_raw())
    # The client is gone while the upstream still has chunks to send: the proxy must hang up on it.
    assert upstream.stream_abandoned.wait(timeout=10)


def test_none_forwards_the_body_byte_for_byte(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    raw = b'{"model":"gpt-4o",  "messages":[{"role":"user","content":"caf\\u00e9"}], "top_p": 1.0}'
    response = httpx.post(f"{proxy.url}/v1/chat/completions", content=raw, headers={"X-Compaction-Strategies": "none"})
    assert response.status_code == 200
    assert upstream.last().body == raw
    assert response.headers["x-compaction-strategies"] == "none"
    assert response.headers["x-compaction-tokens-before"] == response.headers["x-compaction-tokens-after"]


def test_per_request_parameters_apply_to_that_request_only(client: openai.OpenAI, upstream: StandInUpstream) -> None:
    messages = agent_loop(8, output_chars=1000)
    header = "shorten_tools(full_tool_outputs=3, max_tool_chars=0, epoch=0, min_gain=0)"

    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=messages, extra_headers={"X-Compaction-Strategies": header}
    )
    tuned = upstream.last().json()["messages"]
    client.chat.completions.create(model="gpt-4o", messages=messages)
    default = upstream.last().json()["messages"]

    assert (
        raw.headers["x-compaction-strategies"]
        == "shorten_tools(full_tool_outputs=3,max_tool_chars=0,epoch=0,min_gain=0)"
    )
    whole = [m for m in tuned if m["role"] == "tool" and "chars elided; call compaction_expand" not in m["content"]]
    assert [m["tool_call_id"] for m in whole] == ["call_5", "call_6", "call_7"]
    assert default == messages  # the default chain leaves a conversation far below the window alone


@pytest.mark.parametrize(
    ("header", "code", "mentions"),
    [
        ("shorten_tool", "unknown_strategy", "valid strategies: clear_tool_uses, dedupe, fit"),
        ("shorten_tools(bogus=1)", "unknown_parameter", "min_gain, pace, full_tool_calls, full_tool_outputs"),
        ("prune_tool_outputs(max_chars=-5)", "invalid_parameter", "max_chars"),
        ("shorten_tools(full_tool_outputs=3", "invalid_strategy_header", "missing ')'"),
        # Issue 11: recursion in the JSON parser used to make this a plain-text 500.
        ("fit(total=" + "[" * 2000 + "]" * 2000 + ")", "invalid_strategy_header", "nested more than 8 deep"),
    ],
)
def test_bad_strategy_header_is_a_400_and_nothing_is_sent(
    client: openai.OpenAI, upstream: StandInUpstream, header: str, code: str, mentions: str
) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Compaction-Strategies": header},
        )
    error = raised.value.body
    assert isinstance(error, dict)
    assert error["code"] == code
    assert error["param"] == "X-Compaction-Strategies"
    assert error["type"] == "invalid_request_error"
    assert mentions in error["message"]
    assert upstream.received == []


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"model": "gpt-4o", "messages": [', "invalid_json"),
        (b'["not", "an", "object"]', "invalid_json"),
        (b'{"model": "gpt-4o"}', "invalid_messages"),
        (b'{"model": "gpt-4o", "messages": "hi"}', "invalid_messages"),
        (b'{"model": "gpt-4o", "messages": [{"content": "no role"}]}', "invalid_messages"),
    ],
)
def test_malformed_request_is_a_400_and_nothing_is_sent(
    proxy: LoopbackServer, upstream: StandInUpstream, body: bytes, code: str
) -> None:
    response = httpx.post(f"{proxy.url}/v1/chat/completions", content=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code
    assert upstream.received == []


def test_text_orjson_refuses_is_compacted_and_forwarded(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    # A lone surrogate escape is legal JSON that some clients send; it must survive compaction unchanged.
    raw = (
        b'{"model":"gpt-4o","messages":[{"role":"user","content":"a\\ud83db"},'
        b'{"role":"tool","tool_call_id":"x","content":"' + b"y" * 50 + b'"}]}'
    )
    headers = {"X-Compaction-Strategies": "prune_tool_outputs(max_chars=10)"}
    response = httpx.post(f"{proxy.url}/v1/chat/completions", content=raw, headers=headers)
    assert response.status_code == 200
    assert b'"a\\ud83db"' in upstream.last().body
    assert upstream.last().json()["messages"][1]["content"].startswith("y" * 10 + "\n[... output truncated: ")


def test_compact_is_a_dry_run_with_per_step_stats(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    messages = [
        {"role": "user", "content": "summarise the logs"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "logs", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "line\n" * 2000},
    ]
    response = httpx.post(
        f"{proxy.url}/compact",
        json={"model": "gpt-4o", "messages": messages},
        headers={"X-Compaction-Strategies": "none,prune_tool_outputs(max_chars=100)"},
    )
    assert response.status_code == 200
    report = response.json()
    assert [s["strategy"] for s in report["steps"]] == ["none", "prune_tool_outputs"]
    first, second = report["steps"]
    assert first["tokens_before"] == first["tokens_after"] == report["tokens_before"]
    assert second["tokens_before"] == report["tokens_before"] > second["tokens_after"] == report["tokens_after"]
    assert all(s["ms"] >= 0 for s in report["steps"])
    assert report["messages"][2]["content"].startswith("line\n" * 20)
    assert "[... output truncated: " in report["messages"][2]["content"]
    assert report["messages"][:2] == messages[:2]
    assert response.headers["x-compaction-tokens-after"] == str(report["tokens_after"])
    assert upstream.received == []


def test_compact_rejects_what_chat_completions_rejects(proxy: LoopbackServer) -> None:
    response = httpx.post(f"{proxy.url}/compact", content=b"not json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


# Found by a hunt beside the schema fuzz: a tool call whose id is a list (unhashable) made the strategies that drop or
# rewrite calls raise TypeError, so the request went uncompacted (with on_strategy_error = "fail": a 500).
@pytest.mark.parametrize(
    "chain",
    [
        "shorten_tools(max_tool_chars=0,max_tool_calls=0,epoch=1,min_gain=0)",
        "clear_tool_uses(trigger=0,keep=0,clear_tool_inputs=true)",
    ],
)
def test_a_tool_call_whose_id_is_no_string_is_kept_as_it_came(
    proxy: LoopbackServer, upstream: StandInUpstream, chain: str
) -> None:
    odd = {**tool_call("b"), "id": ["b"]}
    asking = {"role": "assistant", "content": None, "tool_calls": [tool_call("a"), odd]}
    messages = [user("go"), asking, result("a", "A" * 4000), user("next")]
    body = {"model": "gpt-4o", "messages": messages}
    response = httpx.post(f"{proxy.url}/compact", json=body, headers={"X-Compaction-Strategies": chain})
    assert response.status_code == 200
    assert "x-compaction-fallback" not in response.headers
    assert response.json()["tokens_after"] < response.json()["tokens_before"]
    assert odd in response.json()["messages"][1]["tool_calls"]
