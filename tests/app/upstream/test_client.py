"""Upstream answers and failures reach the client as they should."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.app.conftest import ProxyFactory
from tests.support.logs import captured_logs, parsed
from tests.support.servers import LoopbackServer, closed_port
from tests.support.upstream import Canned, StandInUpstream

HI = [{"role": "user", "content": "hi"}]


def test_rate_limit_passes_through_with_retry_after(client: openai.OpenAI, upstream: StandInUpstream) -> None:
    body = b'{"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}'
    upstream.canned = Canned(429, body, {"retry-after": "7", "content-type": "application/json", "x-request-id": "r1"})

    with pytest.raises(openai.RateLimitError) as raised:
        client.chat.completions.create(model="gpt-4o", messages=HI)

    response = raised.value.response
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7"
    assert response.headers["x-request-id"] == "r1"
    assert response.content == body


@pytest.mark.parametrize("status", [400, 401, 404, 500, 503])
def test_upstream_errors_pass_through_unchanged(proxy: LoopbackServer, upstream: StandInUpstream, status: int) -> None:
    body = json.dumps({"error": {"message": f"upstream says {status}", "type": "x", "param": None, "code": None}})
    upstream.canned = Canned(status, body.encode(), {"content-type": "application/json"})

    response = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI})

    assert response.status_code == status
    assert response.content == body.encode()


def test_relevant_response_headers_are_relayed(client: openai.OpenAI, upstream: StandInUpstream) -> None:
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=HI)
    assert raw.headers["x-request-id"] == "req_standin_123"
    assert raw.headers["openai-processing-ms"] == "42"
    assert raw.headers["x-ratelimit-remaining-requests"] == "99"
    assert raw.headers["content-type"] == "application/json"
    # Cookies and alternative services of the upstream's host mean nothing for the proxy's.
    assert "set-cookie" not in raw.headers
    assert "alt-svc" not in raw.headers


def test_upstream_down_is_a_502(start_proxy: ProxyFactory) -> None:
    with start_proxy(upstream_base_url=f"http://127.0.0.1:{closed_port()}/v1") as proxy:
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-test", max_retries=0)
        with pytest.raises(openai.APIStatusError) as raised:
            client.chat.completions.create(model="gpt-4o", messages=HI)
    assert raised.value.status_code == 502
    assert raised.value.body == {
        "message": "The upstream API could not be reached.",
        "type": "upstream_error",
        "param": None,
        "code": "upstream_unreachable",
    }


def test_upstream_timeout_is_a_504(start_proxy: ProxyFactory, upstream: StandInUpstream) -> None:
    upstream.answer_gate.clear()  # the upstream accepts the request and never answers
    with start_proxy(read_timeout=0.2) as proxy:
        response = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI})
    upstream.answer_gate.set()
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"


def proxy_side(lines: list[str]) -> list[dict[str, Any]]:
    # The SDK's own client-side logging (openai, httpx2, httpcore2) is not the proxy's to police.
    return [e for e in parsed(lines) if not e["logger"].startswith(("openai", "httpx2", "httpcore2"))]


def test_api_keys_never_reach_the_logs(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    secret = "sk-live-SECRET-0123456789"
    with captured_logs() as lines:
        keyed = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=secret, max_retries=0, default_query={"key": secret})
        keyed.chat.completions.create(model="gpt-4o", messages=HI)
        keyed.models.list()
        with pytest.raises(openai.BadRequestError):
            keyed.chat.completions.create(
                model="gpt-4o", messages=HI, extra_headers={"X-Compaction-Strategies": "nope"}
            )
        upstream.canned = Canned(500, b'{"error": {"message": "boom"}}')
        with pytest.raises(openai.InternalServerError):
            keyed.chat.completions.create(model="gpt-4o", messages=HI)

    assert upstream.received[0].headers["authorization"] == f"Bearer {secret}"
    assert upstream.received[0].query == f"key={secret}"
    logged = proxy_side(lines)
    assert any(e["logger"].startswith("compaction_proxy") for e in logged)
    assert any(e["logger"].startswith("uvicorn") for e in logged)
    assert [line for line in lines if secret in line and json.loads(line) in logged] == []


def test_proxy_and_upstream_keys_never_reach_the_logs(start_proxy: ProxyFactory, upstream: StandInUpstream) -> None:
    right, wrong, upstream_key = "sk-proxy-RIGHT-0123456789", "sk-proxy-WRONG-0123456789", "sk-upstream-OPERATOR-42"
    # Started first: uvicorn configures its loggers when a server is created, dropping added handlers.
    with start_proxy(api_keys=[right], upstream_api_key=upstream_key) as proxy, captured_logs() as lines:
        for key in (right, wrong, upstream_key):
            client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=key, max_retries=0, default_query={"key": key})
            try:
                client.chat.completions.create(model="gpt-4o", messages=HI)
                list(client.chat.completions.create(model="gpt-4o", messages=HI, stream=True))
                client.models.list()
                with pytest.raises(openai.BadRequestError):
                    client.chat.completions.create(
                        model="gpt-4o", messages=HI, extra_headers={"X-Compaction-Strategies": "nope"}
                    )
            except openai.AuthenticationError:
                assert key != right
            else:
                assert key == right
        httpx.post(f"{proxy.url}/compact", json={"messages": HI}, headers={"Authorization": f"Basic {wrong}"})

    assert [r.headers["authorization"] for r in upstream.received] == [f"Bearer {upstream_key}"] * 3
    logged = proxy_side(lines)
    assert any(e["logger"].startswith("compaction_proxy") for e in logged)
    assert any(e["logger"].startswith("uvicorn") for e in logged)
    for secret in (right, wrong, upstream_key):
        assert [line for line in lines if secret in line and json.loads(line) in logged] == []
