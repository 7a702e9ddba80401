"""Every error the proxy answers itself is JSON in OpenAI's shape, whatever fails; never the server's plain text."""

from __future__ import annotations

import json

import httpx
from fastapi import Request

from app import Settings, create_app
from tests.app.conftest import ProxyFactory
from tests.support.logs import captured_logs, parsed
from tests.support.servers import LoopbackServer
from tests.support.upstream import StandInUpstream

SECRET = "sk-live-secret-0042"


def test_an_unhandled_exception_is_a_json_500_logged_once_with_its_traceback(upstream: StandInUpstream) -> None:
    app = create_app(Settings(upstream_base_url=f"{upstream.url}/v1"))  # type: ignore[attr-defined]

    async def broken(request: Request) -> None:
        raise RuntimeError("a bug the proxy did not foresee")

    app.add_api_route("/broken", broken, methods=["POST"])  # a route with a bug, standing in for any other
    with captured_logs() as lines, LoopbackServer(app) as proxy:
        headers = {"Authorization": f"Bearer {SECRET}", "X-Request-Id": "trace-500"}
        response = httpx.post(f"{proxy.url}/broken?key={SECRET}", headers=headers)
        assert httpx.get(f"{proxy.url}/healthz").status_code == 200  # the process goes on

    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-compaction-request-id"] == "trace-500"
    assert response.json() == {
        "error": {
            "message": "The proxy failed to handle the request.",
            "type": "server_error",
            "param": None,
            "code": "internal_error",
        }
    }
    errors = [e for e in parsed(lines) if e["level"] == "error"]
    assert len(errors) == 1  # ours: the server does not log it a second time
    assert errors[0]["message"] == "unhandled error on POST /broken"
    assert errors[0]["request_id"] == "trace-500"
    assert "RuntimeError: a bug the proxy did not foresee" in errors[0]["exc_info"]
    assert not [line for line in lines if SECRET in line]


def test_compact_answers_text_only_the_stdlib_can_write(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    # A lone surrogate: valid JSON that clients send (a cut emoji), which orjson refuses to read or write.
    raw = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "a\\ud800b"}]}'
    response = httpx.post(f"{proxy.url}/compact", content=raw)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert json.loads(response.content)["messages"] == [{"role": "user", "content": "a\ud800b"}]
    assert upstream.received == []


def test_on_the_messages_route_a_500_and_a_413_are_in_anthropics_shape(start_proxy: ProxyFactory) -> None:
    with start_proxy(max_body_bytes=1000) as proxy:
        proxy.server.config.app.state.services.compactor.compact_sync = None  # a bug: calling it raises
        broken = httpx.post(f"{proxy.url}/v1/messages", json={"messages": []})
        too_large = httpx.post(f"{proxy.url}/v1/messages", content=b"x" * 2000)
    assert broken.status_code == 500
    assert broken.json() == {
        "type": "error",
        "error": {"type": "api_error", "message": "The proxy failed to handle the request."},
    }
    assert too_large.status_code == 413 and too_large.json()["error"]["type"] == "request_too_large"
