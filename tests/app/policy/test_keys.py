"""Proxy keys: clients present one of the proxy's keys; the operator's key goes upstream instead."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.app.conftest import ProxyFactory
from tests.support.servers import LoopbackServer
from tests.support.upstream import StandInUpstream

HI = [{"role": "user", "content": "hi"}]
PROXY_KEYS = ["sk-proxy-alice-0001", "sk-proxy-bob-0002"]
UPSTREAM_KEY = "sk-upstream-OPERATOR-0001"


@pytest.fixture(scope="module")
def keyed_server(start_proxy: ProxyFactory) -> Iterator[LoopbackServer]:
    with start_proxy(api_keys=PROXY_KEYS, upstream_api_key=UPSTREAM_KEY) as server:
        yield server


@pytest.fixture
def keyed(keyed_server: LoopbackServer, upstream: StandInUpstream) -> LoopbackServer:
    return keyed_server


def sdk(proxy: LoopbackServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=key, max_retries=0)


@pytest.mark.parametrize("key", PROXY_KEYS)
def test_a_proxy_key_is_replaced_by_the_upstream_key(
    keyed: LoopbackServer, upstream: StandInUpstream, key: str
) -> None:
    client = sdk(keyed, key)
    client.chat.completions.create(model="gpt-4o", messages=HI)
    client.models.list()
    list(client.chat.completions.create(model="gpt-4o", messages=HI, stream=True))

    assert [r.path for r in upstream.received] == ["/v1/chat/completions", "/v1/models", "/v1/chat/completions"]
    for received in upstream.received:
        assert [v for k, v in received.headers.items() if k == "authorization"] == [f"Bearer {UPSTREAM_KEY}"]


@pytest.mark.parametrize(
    "key",
    [
        "sk-proxy-wrong-0001",
        PROXY_KEYS[0][:-1],  # a prefix of a valid key
        PROXY_KEYS[0] + "1",  # a valid key with more after it
        PROXY_KEYS[0].upper(),
        UPSTREAM_KEY,  # the upstream key is not a client key
    ],
)
def test_a_wrong_key_is_a_401_and_nothing_is_sent(keyed: LoopbackServer, upstream: StandInUpstream, key: str) -> None:
    client = sdk(keyed, key)
    with pytest.raises(openai.AuthenticationError) as raised:
        client.chat.completions.create(model="gpt-4o", messages=HI)
    assert raised.value.status_code == 401
    assert raised.value.body == {
        "message": "Incorrect API key provided.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
    assert key not in raised.value.response.text
    assert key not in str(raised.value.response.headers)
    with pytest.raises(openai.AuthenticationError):
        client.models.list()
    compact = httpx.post(f"{keyed.url}/compact", json={"messages": HI}, headers={"Authorization": f"Bearer {key}"})
    assert compact.status_code == 401
    assert upstream.received == []


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", f"Basic {PROXY_KEYS[0]}", PROXY_KEYS[0], f"Token {PROXY_KEYS[0]}"],
)
def test_no_bearer_token_is_a_401(keyed: LoopbackServer, upstream: StandInUpstream, authorization: str | None) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    for method, path in [("POST", "/v1/chat/completions"), ("GET", "/v1/models"), ("POST", "/compact")]:
        response = httpx.request(method, f"{keyed.url}{path}", json={"messages": HI}, headers=headers)
        assert response.status_code == 401, path
        assert response.json()["error"]["code"] == "missing_api_key"
        assert response.headers["www-authenticate"] == "Bearer"
    assert upstream.received == []


def test_scheme_is_case_insensitive(keyed: LoopbackServer, upstream: StandInUpstream) -> None:
    response = httpx.get(f"{keyed.url}/v1/models", headers={"Authorization": f"bearer {PROXY_KEYS[1]}"})
    assert response.status_code == 200
    assert upstream.last().headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_health_readiness_and_metrics_need_no_key(keyed: LoopbackServer) -> None:
    for path in ("/healthz", "/readyz", "/metrics"):
        assert httpx.get(f"{keyed.url}{path}").status_code == 200, path


def test_proxy_keys_without_an_upstream_key_send_no_authorization(
    start_proxy: ProxyFactory, upstream: StandInUpstream
) -> None:
    # E.g. a local model server that needs no key, guarded by the proxy's own keys.
    with start_proxy(api_keys=PROXY_KEYS) as proxy:
        sdk(proxy, PROXY_KEYS[0]).chat.completions.create(model="gpt-4o", messages=HI)
    assert "authorization" not in upstream.last().headers


def test_explicitly_unauthenticated_upstream_key_needs_no_client_key(
    start_proxy: ProxyFactory, upstream: StandInUpstream
) -> None:
    with start_proxy(upstream_api_key=UPSTREAM_KEY, allow_unauthenticated=True) as proxy:
        httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": HI})
        assert upstream.last().headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
        sdk(proxy, "sk-client-own-key").models.list()  # whatever the client sends is replaced
        assert upstream.last().headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_passthrough_mode_forwards_the_clients_key(client: openai.OpenAI, upstream: StandInUpstream) -> None:
    client.chat.completions.create(model="gpt-4o", messages=HI)
    client.models.list()
    assert [r.headers["authorization"] for r in upstream.received] == ["Bearer sk-test-key"] * 2


def test_x_api_key_carries_a_proxy_key_too_and_never_goes_upstream(
    keyed: LoopbackServer, upstream: StandInUpstream
) -> None:
    response = httpx.post(
        f"{keyed.url}/v1/chat/completions",
        json={"model": "gpt-4o", "messages": HI},
        headers={"x-api-key": PROXY_KEYS[1]},
    )
    assert response.status_code == 200
    assert upstream.last().headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert "x-api-key" not in upstream.last().headers
    wrong = httpx.post(f"{keyed.url}/v1/messages", json={"messages": HI}, headers={"x-api-key": "sk-nope"})
    assert wrong.status_code == 401
    assert wrong.json() == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "Incorrect API key provided."},
    }
