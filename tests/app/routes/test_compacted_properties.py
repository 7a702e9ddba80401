"""Hypothesis over whole requests posted through the proxy on loopback to the stand-in upstream: valid
conversations under random chains, and random JSON where the messages should be. Never a 5xx from the proxy,
never a hang (every request has a timeout), and what a valid conversation becomes upstream is still valid.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import format_chain
from strategies.invariants import pairing_problems
from strategies.messages import Message
from tests.strategies.generators import conversations
from tests.strategies.test_chain_properties import steps
from tests.support.servers import LoopbackServer
from tests.support.upstream import StandInUpstream

examples = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
TIMEOUT = 30  # generous; a hang fails the example instead of stalling the run

# Lone surrogates included: clients send them escaped, and the proxy must forward them as they came.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)
# Objects with the fields strategies look at, each either plausible or any JSON at all.
message_like = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["system", "user", "assistant", "tool", "function", "developer"]) | json_values,
        "content": st.text(max_size=300) | json_values,
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {}, optional={"id": st.text(max_size=6) | json_values, "function": json_values, "type": json_values}
            ),
            max_size=3,
        )
        | json_values,
        "tool_call_id": st.text(max_size=6) | json_values,
        "function_call": json_values,
        "name": json_values,
    },
)
malformed_messages = st.one_of(json_values, st.lists(json_values, max_size=5), st.lists(message_like, max_size=6))
chain_headers = st.none() | st.lists(steps, min_size=1, max_size=3).map(format_chain)


def post(proxy: LoopbackServer, path: str, body: Any, chain: str | None) -> httpx.Response:
    headers = {"content-type": "application/json", "authorization": "Bearer sk-test"}
    if chain is not None:
        headers["x-compaction-strategies"] = chain
    # json.dumps escapes non-ASCII, so lone surrogates travel as \ud800 escapes, as real clients send them.
    return httpx.post(f"{proxy.url}{path}", content=json.dumps(body), headers=headers, timeout=TIMEOUT)


def assert_openai_error(response: httpx.Response) -> None:
    error = response.json()["error"]
    assert isinstance(error["message"], str) and isinstance(error["type"], str), error


@examples
@given(messages=conversations(), chain=chain_headers, stream=st.booleans())
def test_a_valid_conversation_is_forwarded_with_every_tool_call_paired(
    proxy: LoopbackServer, upstream: StandInUpstream, messages: list[Message], chain: str | None, stream: bool
) -> None:
    assert pairing_problems(messages) == []  # the generator builds valid conversations only
    upstream.received.clear()
    body = {"model": "gpt-4o", "messages": messages, "stream": stream}
    response = post(proxy, "/v1/chat/completions", body, chain)
    assert response.status_code == 200, response.text
    assert "x-compaction-fallback" not in response.headers  # no strategy failed on a valid conversation
    forwarded = upstream.last().json()
    assert pairing_problems(forwarded["messages"]) == []
    assert forwarded["stream"] is stream
    if stream:
        assert response.text.endswith("data: [DONE]\n\n")


@examples
@given(messages=malformed_messages, chain=chain_headers, path=st.sampled_from(["/v1/chat/completions", "/compact"]))
def test_any_json_where_the_messages_belong_is_answered_without_a_server_error(
    proxy: LoopbackServer, upstream: StandInUpstream, messages: Any, chain: str | None, path: str
) -> None:
    upstream.received.clear()
    response = post(proxy, path, {"model": "gpt-4o", "messages": messages}, chain)
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        assert_openai_error(response)
        assert upstream.received == []  # a refused request never reaches the upstream
    elif path == "/v1/chat/completions":
        assert len(upstream.received) == 1


@examples
@given(body=json_values)
def test_any_json_body_is_answered_without_a_server_error(proxy: LoopbackServer, body: Any) -> None:
    response = post(proxy, "/v1/chat/completions", body, None)
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        assert_openai_error(response)
