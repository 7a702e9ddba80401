"""POST /v1/messages through the proxy on loopback, driven by the official anthropic SDK, against the stand-in
Messages upstream: compacted with its pairs, thinking blocks and breakpoints intact, streamed, headers as sent.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import orjson
import pytest

from app.wire import AnthropicMessages
from bench.compaction.wire_forms import messages_body, messages_problems
from strategies.refs import EXPAND_DESCRIPTION, EXPAND_PARAMETERS, EXPAND_TOOL
from tests.app.conftest import ProxyFactory
from tests.factories import agent_loop
from tests.support.messages_upstream import signature
from tests.support.servers import LoopbackServer
from tests.support.upstream import Behaviour, Canned, StandInUpstream

BETAS = "claude-code-20250219,context-1m-2025-08-07,interleaved-thinking-2025-05-14,context-management-2025-06-27"
TOOLS = [{"name": "read", "description": "Read a file.", "input_schema": {"type": "object", "properties": {}}}]


@pytest.fixture
def client(proxy: LoopbackServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test", max_retries=0)


def agent_body(rounds: int, output_chars: int) -> dict[str, Any]:
    """A Claude Code session of `rounds` tool uses: system blocks, signed thinking, breakpoints on system and last."""
    body: dict[str, Any] = json.loads(messages_body(agent_loop(rounds, output_chars), {"model": "claude-sonnet-4-5"}))
    return {**body, "tools": TOOLS, "thinking": {"type": "enabled", "budget_tokens": 2048}}


def thinking_blocks(body: dict[str, Any]) -> list[bytes]:
    return [
        orjson.dumps(block)
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "thinking"
    ]


def test_a_long_session_is_compacted_with_pairs_thinking_and_breakpoints_intact(
    client: anthropic.Anthropic, upstream: StandInUpstream
) -> None:
    body = agent_body(200, output_chars=4000)
    upstream.behaviour = Behaviour(context_window=200_000)  # claude-sonnet-4-5's, counted by its own tokenizer

    raw = client.beta.messages.with_raw_response.create(
        **body,
        betas=BETAS.split(",")[:1],
        extra_headers={"X-Compaction-Strategies": "minify,dedupe,window"},
        extra_query={"beta": "true"},  # as Claude Code asks
    )
    answer = raw.parse()

    sent = upstream.last().json()
    assert answer.content[-1].type == "text" and answer.content[-1].text == f"seen {len(sent['messages'])} messages"
    before = int(raw.headers["x-compaction-tokens-before"])
    after = int(raw.headers["x-compaction-tokens-after"])
    assert before > 200_000 > 136_000 > after  # claude-sonnet-4-5's window, less the 64k output reserve
    assert "x-compaction-retried" not in raw.headers
    assert upstream.last().prompt_tokens is not None and upstream.last().prompt_tokens < 136_000  # its own count
    assert len(sent["messages"]) < len(body["messages"])
    assert messages_problems(body, sent) == []
    assert set(thinking_blocks(sent)) <= set(thinking_blocks(body))  # every one as it came, signature and all
    assert sent["messages"][-2:] == body["messages"][-2:]  # the latest turn whole, its breakpoint in place
    assert sent["system"] == body["system"]
    assert sent["thinking"] == body["thinking"] and sent["tools"] == TOOLS
    assert upstream.last().query == "beta=true"


def test_the_1m_context_beta_lets_the_same_session_go_whole(
    client: anthropic.Anthropic, upstream: StandInUpstream
) -> None:
    body = agent_body(200, output_chars=4000)  # over 200k tokens, under 1M
    window = {"X-Compaction-Strategies": "window"}  # what drops whole turns once a request outgrows the window
    raw = client.beta.messages.with_raw_response.create(**body, betas=BETAS.split(","), extra_headers=window)
    assert int(raw.headers["x-compaction-tokens-after"]) > 200_000
    assert upstream.last().json()["messages"] == body["messages"]
    assert upstream.last().prompt_tokens is not None and upstream.last().prompt_tokens > 200_000  # its own count
    without = [beta for beta in BETAS.split(",") if not beta.startswith("context-1m")]
    client.beta.messages.create(**body, betas=without, extra_headers=window)
    assert len(upstream.last().json()["messages"]) < len(body["messages"])


def test_headers_go_as_sent_and_the_proxys_own_do_not(client: anthropic.Anthropic, upstream: StandInUpstream) -> None:
    client.beta.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=100,
        messages=[{"role": "user", "content": "hi"}],
        betas=BETAS.split(","),
        extra_headers={
            "X-Compaction-Strategies": "none",
            "X-Claude-Code-Session-Id": "s-1",
            "anthropic-version": "2023-06-01",  # Claude Code's
        },
        extra_query={"beta": "true"},
    )
    received = upstream.last()
    assert received.path == "/v1/messages" and received.query == "beta=true"
    assert received.headers["anthropic-beta"] == BETAS  # every value, in order
    assert received.headers["anthropic-version"] == "2023-06-01"
    assert received.headers["authorization"] == "Bearer sk-ant-test"  # this SDK's way; Claude Code's is x-api-key
    assert received.headers["x-claude-code-session-id"] == "s-1"
    assert not [name for name in received.headers if name.startswith("x-compaction-")]


def test_streaming_relays_thinking_signature_and_text(client: anthropic.Anthropic, upstream: StandInUpstream) -> None:
    body = agent_body(3, output_chars=100)
    with client.messages.stream(**body) as stream:
        final = stream.get_final_message()

    thinking = final.content[0]
    assert thinking.type == "thinking" and thinking.signature == signature(thinking.thinking)
    assert final.content[-1].type == "text" and final.content[-1].text == "seen 7 messages"
    assert upstream.last().json()["messages"] == body["messages"]  # nothing to compact: as it came


def test_a_long_session_streamed_is_compacted_with_pairs_thinking_and_breakpoints_intact(
    client: anthropic.Anthropic, upstream: StandInUpstream
) -> None:
    body = agent_body(200, output_chars=4000)
    betas = [beta for beta in BETAS.split(",") if not beta.startswith("context-1m")]  # the 200k window
    with client.beta.messages.stream(
        **body,
        betas=betas,
        extra_headers={"X-Compaction-Strategies": "minify,dedupe,window"},
        extra_query={"beta": "true"},
    ) as stream:
        final = stream.get_final_message()
        headers = stream.response.headers

    sent = upstream.last().json()
    assert int(headers["x-compaction-tokens-before"]) > int(headers["x-compaction-tokens-after"])
    assert len(sent["messages"]) < len(body["messages"]) and sent["stream"] is True
    assert messages_problems(body, sent) == []  # pairs, thinking as it came, the latest turn whole, <= 4 breakpoints
    assert set(thinking_blocks(sent)) <= set(thinking_blocks(body))
    assert upstream.last().headers["anthropic-beta"] == ",".join(betas) and upstream.last().query == "beta=true"
    thinking = final.content[0]  # the answer's own thinking, streamed as thinking_delta and signature_delta
    assert thinking.type == "thinking" and thinking.signature == signature(thinking.thinking)
    assert final.content[-1].type == "text" and final.content[-1].text == f"seen {len(sent['messages'])} messages"


def test_a_stream_cut_mid_character_is_relayed_byte_for_byte(
    client: anthropic.Anthropic, proxy: LoopbackServer, upstream: StandInUpstream
) -> None:
    upstream.stream_chunk_bytes = 1  # every multibyte character split across chunks
    body = {**agent_body(2, output_chars=50), "stream": True}
    direct = httpx.post(f"{upstream.url}/v1/messages", json=body)  # type: ignore[attr-defined]
    via_proxy = httpx.post(f"{proxy.url}/v1/messages", json=body)
    assert via_proxy.content == direct.content and "déjà vu? ✓".encode() in via_proxy.content
    with client.messages.stream(**agent_body(2, output_chars=50)) as stream:
        final = stream.get_final_message()
    assert final.content[0].type == "thinking" and final.content[0].thinking.endswith("déjà vu? ✓")
    assert final.content[0].signature == signature(final.content[0].thinking)


def test_stream_bytes_are_relayed_unchanged(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 10,
        "stream": True,
        "messages": [{"role": "user", "content": "é"}],
    }
    direct = httpx.post(f"{upstream.url}/v1/messages", json=body)  # type: ignore[attr-defined]
    via_proxy = httpx.post(f"{proxy.url}/v1/messages", json=body)
    assert via_proxy.content == direct.content
    assert b"event: content_block_delta" in via_proxy.content
    assert via_proxy.content.rstrip().endswith(b'{"type": "message_stop"}')
    assert "set-cookie" not in via_proxy.headers and via_proxy.headers["request-id"] == "req_standin_msg"


def test_an_unchanged_request_is_forwarded_byte_for_byte(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    raw = b'{"model":"claude-sonnet-4-5",  "max_tokens":5, "messages":[{"role":"user","content":"caf\\u00e9"}]}'
    response = httpx.post(
        f"{proxy.url}/v1/messages?beta=true", content=raw, headers={"anthropic-version": "2023-06-01"}
    )
    assert response.status_code == 200
    assert upstream.last().body == raw
    assert response.headers["x-compaction-strategies"] == "minify,mask,window"


def test_a_broken_stream_makes_the_sdk_raise(client: anthropic.Anthropic, upstream: StandInUpstream) -> None:
    upstream.break_stream_after = 4  # message_start, ping, a thinking block begun and one delta
    with pytest.raises(anthropic.APIStatusError) as raised, client.messages.stream(**agent_body(2, 50)) as stream:
        stream.get_final_message()
    assert "broke off" in str(raised.value)


def test_an_upstream_error_reaches_the_client_unchanged(client: anthropic.Anthropic, upstream: StandInUpstream) -> None:
    error = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}'
    upstream.canned = Canned(529, error, {"content-type": "application/json", "retry-after": "7"})
    with pytest.raises(anthropic.APIStatusError) as raised:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert raised.value.status_code == 529
    assert raised.value.response.content == error
    assert raised.value.response.headers["retry-after"] == "7"


@pytest.mark.parametrize(
    ("body", "mentions"),
    [
        (b'{"model": "claude-sonnet-4-5", "messages": [', "not valid JSON"),
        (b'{"model": "claude-sonnet-4-5"}', "messages"),
        (b'{"messages": [{"role": "tool", "content": "x"}]}', "messages.0"),
        (b'{"messages": [{"role": "user", "content": [{"text": "no type"}]}]}', "messages.0.content.0"),
        (b'{"messages": [], "system": 3}', "system"),
        (b'{"messages": [], "stream": "yes"}', "stream"),
    ],
)
def test_a_bad_body_is_a_400_in_anthropics_shape(
    proxy: LoopbackServer, upstream: StandInUpstream, body: bytes, mentions: str
) -> None:
    response = httpx.post(f"{proxy.url}/v1/messages", content=body)
    assert response.status_code == 400
    error = response.json()
    assert error["type"] == "error" and set(error) == {"type", "error"}
    assert error["error"]["type"] == "invalid_request_error" and mentions in error["error"]["message"]
    assert upstream.received == []


# Found by the schema fuzz (tests/app/test_openapi.py): `role not in ROLES` raised TypeError (unhashable), a 500.
@pytest.mark.parametrize("path", ["/v1/messages", "/compact/messages"])
@pytest.mark.parametrize("role", [["user"], {"role": "user"}, []], ids=["a-list", "an-object", "empty-list"])
def test_a_role_that_is_no_string_is_a_400_not_a_500(
    proxy: LoopbackServer, upstream: StandInUpstream, path: str, role: Any
) -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [{"role": role, "content": "hi"}]}
    response = httpx.post(f"{proxy.url}{path}", json=body)
    assert response.status_code == 400
    message = "messages.0: Input should be an object with role 'user', 'assistant' or 'system'."
    assert response.json() == {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    assert upstream.received == []


# The input of the schema fuzz's one failure on a fresh clone (issue 23): `tools` a number. The proxy forwards what
# it does not act on as sent (its token count skips tools that are no array), and the API refuses it: a 400 in
# Anthropic's shape. The stand-in iterated over it and answered 500 ("'float' object is not iterable"), relayed.
@pytest.mark.parametrize("tools", [1.5, 1, True, "read", {"name": "read"}])
def test_tools_that_are_no_array_are_forwarded_as_sent_and_refused_by_the_api(
    proxy: LoopbackServer, upstream: StandInUpstream, tools: Any
) -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    response = httpx.post(f"{proxy.url}/v1/messages", json={**body, "tools": tools})
    assert response.status_code == 400
    assert response.json()["type"] == "error" and response.json()["error"]["type"] == "invalid_request_error"
    assert upstream.last().json()["tools"] == tools
    dry = httpx.post(f"{proxy.url}/compact/messages", json={**body, "tools": tools})
    assert dry.status_code == 200 and dry.json()["messages"] == body["messages"]


def test_the_sdk_reads_the_proxys_own_errors(client: anthropic.Anthropic, upstream: StandInUpstream) -> None:
    with pytest.raises(anthropic.BadRequestError) as raised:
        client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=5,
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Compaction-Strategies": "no_such_strategy"},
        )
    assert "no_such_strategy" in raised.value.message
    assert isinstance(raised.value.body, dict) and raised.value.body["error"]["type"] == "invalid_request_error"


def test_proxy_keys_are_taken_as_x_api_key_and_the_held_key_replaces_them(
    start_proxy: ProxyFactory, upstream: StandInUpstream
) -> None:
    with start_proxy(api_keys="sk-proxy-1", anthropic_api_key="sk-ant-held") as proxy:
        good = anthropic.Anthropic(base_url=proxy.url, api_key="sk-proxy-1", max_retries=0)
        good.messages.create(model="claude-sonnet-4-5", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        sent = upstream.last().headers
        as_claude_code = httpx.post(
            f"{proxy.url}/v1/messages/count_tokens",
            json={"model": "claude-sonnet-4-5", "messages": []},
            headers={"x-api-key": "sk-proxy-1", "anthropic-version": "2023-06-01"},
        )
        wrong = anthropic.Anthropic(base_url=proxy.url, api_key="sk-wrong", max_retries=0)
        with pytest.raises(anthropic.AuthenticationError) as raised:
            wrong.messages.create(model="claude-sonnet-4-5", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert sent["x-api-key"] == "sk-ant-held" and "authorization" not in sent
    assert as_claude_code.status_code == 200 and upstream.last().headers["x-api-key"] == "sk-ant-held"
    expected = {"type": "authentication_error", "message": "Incorrect API key provided."}
    assert raised.value.body == {"type": "error", "error": expected}
    assert "sk-wrong" not in raised.value.response.text


def test_count_tokens_and_models_go_to_anthropics_upstream(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test", max_retries=0)
    counted = client.messages.count_tokens(model="claude-sonnet-4-5", messages=[{"role": "user", "content": "hi"}])
    assert counted.input_tokens > 0 and upstream.last().path == "/v1/messages/count_tokens"
    httpx.get(f"{proxy.url}/v1/models", headers={"anthropic-version": "2023-06-01", "x-api-key": "k"})
    assert upstream.last().path == "/v1/models" and upstream.last().headers["anthropic-version"] == "2023-06-01"


def test_claude_codes_probe_is_answered(proxy: LoopbackServer) -> None:
    assert httpx.head(f"{proxy.url}/").status_code == 200


def test_compact_messages_is_a_dry_run(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    body = agent_body(6, output_chars=3000)
    header = {"X-Compaction-Strategies": "prune_tool_outputs(max_chars=100)"}
    report = httpx.post(f"{proxy.url}/compact/messages", json=body, headers=header).json()
    assert report["system"] == body["system"]
    assert report["tokens_before"] > report["tokens_after"]
    assert [s["strategy"] for s in report["steps"]] == ["prune_tool_outputs"]
    results = [b for m in report["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert "[... output truncated: 3,000 chars in all; call compaction_expand with ref=" in results[0]["content"]
    assert report["messages"][-2] == body["messages"][-2]  # the latest assistant turn whole; its results pruned
    assert messages_problems(body, report) == []
    # The expand tool it would add, in the Messages API's own shape.
    tool = {"name": EXPAND_TOOL, "description": EXPAND_DESCRIPTION, "input_schema": EXPAND_PARAMETERS}
    assert report["added_tools"] == [tool]
    assert upstream.received == []


def test_the_compaction_headers_and_prefix_report_come_back(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    first = agent_body(3, output_chars=100)
    later = agent_body(4, output_chars=100)  # the same session, one round on
    answers = [
        httpx.post(f"{proxy.url}/v1/messages", json=body, headers={"x-api-key": "k-9"}) for body in (first, later)
    ]
    assert [a.headers["x-compaction-prefix"] for a in answers] == ["new", "extends"]
    assert all(int(a.headers["x-compaction-tokens-before"]) > 0 for a in answers)
    assert answers[0].headers["x-compaction-strategies"] == "minify,mask,window"


def test_the_latest_turn_put_back_is_counted_as_sent(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    body = agent_body(5, output_chars=2000)
    drop_every_pair = {"X-Compaction-Strategies": "shorten_tools(max_tool_calls=0,max_tool_chars=0,epoch=0,min_gain=0)"}
    report = httpx.post(f"{proxy.url}/compact/messages", json=body, headers=drop_every_pair).json()
    assert report["messages"][-2:] == body["messages"][-2:]  # every pair dropped but the latest turn's
    assert len(report["messages"]) == 3
    sent = {**body, "system": report["system"], "messages": report["messages"]}
    recount = httpx.post(f"{proxy.url}/compact/messages", json=sent, headers={"X-Compaction-Strategies": "none"}).json()
    assert report["tokens_after"] == recount["tokens_before"]


def test_a_bug_in_rendering_forwards_the_request_as_it_came(
    proxy: LoopbackServer, upstream: StandInUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: AnthropicMessages, parsed: Any, messages: Any) -> bytes:
        raise RuntimeError("a render bug")

    monkeypatch.setattr(AnthropicMessages, "render", broken)
    raw = orjson.dumps(agent_body(4, output_chars=3000))
    headers = {"X-Compaction-Strategies": "prune_tool_outputs(max_chars=10)"}
    response = httpx.post(f"{proxy.url}/v1/messages", content=raw, headers=headers)
    assert response.status_code == 200
    assert response.headers["x-compaction-fallback"] == "strategy_error"
    assert upstream.last().body == raw
