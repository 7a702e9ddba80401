"""The /v1/responses WebSocket: refused with a 426 by default, or relayed both ways (responses_websocket = "relay")
under the proxy's key rules, to the stand-in upstream's own socket.
"""

from __future__ import annotations

import json

import pytest
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.app.conftest import ProxyFactory
from tests.support.servers import LoopbackServer
from tests.support.upstream import StandInUpstream

BETA = {"openai-beta": "responses_websockets=2026-02-06"}


def socket(proxy: LoopbackServer, key: str | None = "sk-client") -> ClientConnection:
    headers = {**BETA, **({"authorization": f"Bearer {key}"} if key else {})}
    return connect(f"ws://127.0.0.1:{proxy.port}/v1/responses", additional_headers=headers, open_timeout=10)


def refusal(proxy: LoopbackServer, key: str | None = "sk-client") -> tuple[int, dict[str, object]]:
    with pytest.raises(InvalidStatus) as raised:
        socket(proxy, key).close()
    response = raised.value.response
    return response.status_code, json.loads(response.body or b"{}")


def test_a_websocket_is_refused_with_a_426_by_default(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    status, body = refusal(proxy)
    assert status == 426
    assert body["error"]["code"] == "websocket_not_accepted"  # type: ignore[index]
    assert upstream.socket_handshakes == []


def test_a_relayed_socket_carries_frames_both_ways(start_proxy: ProxyFactory, upstream: StandInUpstream) -> None:
    with start_proxy(responses_websocket="relay") as proxy, socket(proxy) as ws:
        for turn in (1, 2):
            ws.send(json.dumps({"type": "response.create", "model": "gpt-5", "input": [], "turn": turn}))
            events = [json.loads(ws.recv(timeout=10)) for _ in range(9)]
            assert events[-1]["type"] == "response.completed"
            assert events[-1]["response"]["output"][0]["content"][0]["text"] == f"seen frame {turn}"
    assert [json.loads(frame)["turn"] for frame in upstream.socket_frames] == [1, 2]  # as sent, uncompacted
    handshake = upstream.socket_handshakes[0]
    assert handshake["authorization"] == "Bearer sk-client"
    assert handshake["openai-beta"] == BETA["openai-beta"]


def test_a_relayed_socket_follows_the_proxy_keys(start_proxy: ProxyFactory, upstream: StandInUpstream) -> None:
    keys = {"api_keys": ["team-key"], "upstream_api_key": "sk-upstream", "responses_websocket": "relay"}
    with start_proxy(**keys) as proxy:
        assert refusal(proxy, key=None)[0] == 401
        assert refusal(proxy, key="wrong")[0] == 401
        assert upstream.socket_handshakes == []  # nothing reached the upstream for them
        with socket(proxy, key="team-key") as ws:
            ws.send(json.dumps({"type": "response.create", "model": "gpt-5"}))
            ws.recv(timeout=10)
    assert upstream.socket_handshakes[0]["authorization"] == "Bearer sk-upstream"


def test_the_upstreams_refusal_reaches_the_client(start_proxy: ProxyFactory, upstream: StandInUpstream) -> None:
    upstream.socket_refusal = 403
    with start_proxy(responses_websocket="relay") as proxy:
        status, body = refusal(proxy)
    assert status == 403
    assert body["error"]["message"] == "no sockets here"  # type: ignore[index]


def test_an_upstream_redirect_is_not_followed(start_proxy: ProxyFactory, upstream: StandInUpstream) -> None:
    reached: list[str] = []

    async def elsewhere(websocket: WebSocket) -> None:
        reached.append(websocket.headers.get("authorization", ""))
        await websocket.close()

    target = Starlette(routes=[WebSocketRoute("/v1/responses", elsewhere)])
    with LoopbackServer(target) as other:
        upstream.socket_redirect = f"ws://localhost:{other.port}/v1/responses"
        with start_proxy(responses_websocket="relay") as proxy:
            status, _ = refusal(proxy)
    assert status == 302  # the upstream's answer, relayed as the refusal of the client's handshake
    assert reached == []  # the client's key went nowhere else
