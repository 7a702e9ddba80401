"""Upstream answers and failures reach the client as they should."""

from __future__ import annotations

import json
import logging

import httpx
import openai
import pytest

from app.logs import configure_logging
from tests.app.conftest import ProxyFactory
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


def test_api_keys_never_reach_the_logs(
    proxy: LoopbackServer, upstream: StandInUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    configure_logging("debug")
    caplog.set_level(logging.DEBUG)
    secret = "sk-live-SECRET-0123456789"
    keyed = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=secret, max_retries=0, default_query={"key": secret})
    keyed.chat.completions.create(model="gpt-4o", messages=HI)
    keyed.models.list()
    with pytest.raises(openai.BadRequestError):
        keyed.chat.completions.create(model="gpt-4o", messages=HI, extra_headers={"X-Compaction-Strategies": "nope"})
    upstream.canned = Canned(500, b'{"error": {"message": "boom"}}')
    with pytest.raises(openai.InternalServerError):
        keyed.chat.completions.create(model="gpt-4o", messages=HI)

    assert upstream.received[0].headers["authorization"] == f"Bearer {secret}"
    assert upstream.received[0].query == f"key={secret}"
    # The SDK's own client-side logging is not the proxy's to police.
    proxy_side = [r for r in caplog.records if not r.name.startswith(("openai", "httpx2", "httpcore2"))]
    assert any(r.name.startswith("compaction_proxy") for r in proxy_side)
    assert not [r.getMessage() for r in proxy_side if secret in r.getMessage()]
