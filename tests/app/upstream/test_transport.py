"""app.upstream.transport: the upstream pool the proxy sends through (httpx's API over aiohttp), against real
loopback servers: connections reused, cookies never carried from one client to another, the environment's
proxy honoured.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.upstream.transport import AiohttpTransport
from tests.app.conftest import ProxyFactory
from tests.support.servers import LoopbackServer, closed_port

COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
}
BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}


class Recorder:
    """An upstream that answers every request with a completion and a Set-Cookie, and remembers what came."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

        async def answer(request: Request) -> Response:
            body = await request.body()
            self.seen.append(
                {
                    "client_port": request.client.port if request.client else None,
                    "headers": dict(request.headers),
                    "target": request.scope.get("raw_path", b"").decode(),
                    "body": body,
                }
            )
            response = JSONResponse(COMPLETION)
            response.set_cookie("session", f"secret-{len(self.seen)}")
            return response

        self.app = Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST"])])


def post_direct(url: str) -> httpx.Response:
    """The test's own request, never through the proxy the environment names for the proxy under test."""
    with httpx.Client(trust_env=False, timeout=10) as client:
        return client.post(url, json=BODY)


@pytest.fixture
def recorder() -> Any:
    rec = Recorder()
    with LoopbackServer(rec.app) as server:
        yield rec, server


def test_sequential_requests_share_one_upstream_connection(start_proxy: ProxyFactory, recorder: Any) -> None:
    rec, server = recorder
    with start_proxy(upstream_base_url=f"{server.url}/v1") as proxy:
        for _ in range(5):
            response = httpx.post(f"{proxy.url}/v1/chat/completions", json=BODY, timeout=10)
            assert response.status_code == 200
    assert len(rec.seen) == 5
    assert len({s["client_port"] for s in rec.seen}) == 1


def test_a_cookie_the_upstream_sets_is_never_sent_with_another_request(
    start_proxy: ProxyFactory, recorder: Any
) -> None:
    rec, server = recorder
    with start_proxy(upstream_base_url=f"{server.url}/v1") as proxy:
        first = httpx.post(f"{proxy.url}/v1/chat/completions", json=BODY, timeout=10)
        assert first.status_code == 200 and "set-cookie" not in first.headers  # app.edge.headers drops it
        httpx.post(f"{proxy.url}/v1/chat/completions", json=BODY, timeout=10)
        httpx.get(f"{proxy.url}/v1/models", timeout=10)
    # Nor does the pool keep it: no later request, from whichever client, carries it upstream.
    assert len(rec.seen) == 3
    assert all("cookie" not in s["headers"] for s in rec.seen)


def test_the_proxys_own_client_keeps_no_cookies(recorder: Any) -> None:
    """The client the summariser and the models' metadata use shares the pool: its jar must stay empty too."""
    from app.edge.metrics import Metrics
    from app.policy.keys import Keys
    from app.settings import Settings
    from app.upstream.client import Upstream

    rec, server = recorder
    upstream = Upstream(Settings(upstream_base_url=f"{server.url}/v1"), Keys(Settings()), Metrics(None))

    async def twice() -> None:
        try:
            for _ in range(2):
                response = await upstream.client.get(f"{server.url}/v1/models")
                assert response.status_code == 200
        finally:
            await upstream.aclose()

    asyncio.run(twice())
    assert [("cookie" in s["headers"]) for s in rec.seen] == [False, False]


@pytest.mark.parametrize("credentials", ["", "proxy-user:proxy-pass@"], ids=["open", "with-credentials"])
def test_the_environments_http_proxy_carries_the_request(
    start_proxy: ProxyFactory, recorder: Any, monkeypatch: pytest.MonkeyPatch, credentials: str
) -> None:
    rec, server = recorder
    monkeypatch.setenv("HTTP_PROXY", server.url.replace("http://", f"http://{credentials}"))
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    # Nothing listens at the upstream's own address: the answer can only have come through the proxy.
    upstream = f"http://upstream.invalid:{closed_port()}/v1"
    with start_proxy(upstream_base_url=upstream) as proxy:
        response = post_direct(f"{proxy.url}/v1/chat/completions")
    assert response.status_code == 200
    assert len(rec.seen) == 1
    assert rec.seen[0]["headers"]["host"].startswith("upstream.invalid:")
    expected = "Basic " + base64.b64encode(b"proxy-user:proxy-pass").decode() if credentials else None
    assert rec.seen[0]["headers"].get("proxy-authorization") == expected
    assert json.loads(rec.seen[0]["body"])["messages"] == BODY["messages"]


def test_no_proxy_sends_direct(start_proxy: ProxyFactory, recorder: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    rec, server = recorder
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with start_proxy(upstream_base_url=f"{server.url}/v1") as proxy:
        response = post_direct(f"{proxy.url}/v1/chat/completions")
    assert response.status_code == 200
    assert len(rec.seen) == 1


def test_an_answer_let_go_before_its_end_does_not_poison_the_pool() -> None:
    """A body closed half-read closes its connection: the next request gets a fresh one and its own answer."""
    big = b"x" * (1 << 20)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(big))]})
        await send({"type": "http.response.body", "body": big})

    with LoopbackServer(app) as server:

        async def run() -> list[int]:
            transport = AiohttpTransport(limits=httpx.Limits(max_connections=1))
            timeout = httpx.Timeout(5.0).as_dict()
            sizes = []
            try:
                for read_whole in (False, True):
                    request = httpx.Request("GET", f"{server.url}/", extensions={"timeout": timeout})
                    response = await transport.handle_async_request(request)
                    size = 0
                    async for chunk in response.aiter_raw():
                        size += len(chunk)
                        if not read_whole:
                            break
                    await response.aclose()
                    sizes.append(size)
            finally:
                await transport.aclose()
            return sizes

        first, second = asyncio.run(run())
    assert 0 < first < len(big)
    assert second == len(big)
