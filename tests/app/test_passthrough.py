"""Every other /v1/* path goes upstream unchanged."""

from __future__ import annotations

import httpx
import openai

from tests.support.servers import LoopbackServer
from tests.support.upstream import StandInUpstream


def test_models_list_passes_through(client: openai.OpenAI, upstream: StandInUpstream) -> None:
    models = client.models.list()
    assert [m.id for m in models.data] == ["gpt-4o"]
    received = upstream.last()
    assert (received.method, received.path) == ("GET", "/v1/models")
    assert received.headers["authorization"] == "Bearer sk-test-key"
    assert received.body == b""
    assert "transfer-encoding" not in received.headers


def test_embeddings_body_and_query_pass_through_unchanged(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    raw = b'{"model": "text-embedding-3-small", "input": ["a", "b"]}'
    response = httpx.post(
        f"{proxy.url}/v1/embeddings?api-version=2024-02-01", content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200
    assert response.json()["data"][0]["embedding"] == [0.5, 0.25]
    received = upstream.last()
    assert received.body == raw
    assert received.query == "api-version=2024-02-01"
    assert received.headers["content-length"] == str(len(raw))


def test_other_methods_and_nested_paths_pass_through(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    response = httpx.delete(f"{proxy.url}/v1/files/file-abc%2F1")
    assert response.status_code == 404  # the stand-in's own answer, relayed
    assert response.json()["error"]["message"] == "no such route"
    assert upstream.last().method == "DELETE"
    assert upstream.last().path == "/v1/files/file-abc/1"  # the stand-in decodes; the proxy sent it encoded


def test_stored_chat_completions_get_is_passed_through(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    httpx.get(f"{proxy.url}/v1/chat/completions?limit=2")
    assert (upstream.last().method, upstream.last().query) == ("GET", "limit=2")


def test_dot_segments_are_refused(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    for path in ("/v1/%2e%2e/admin", "/v1/files/../../admin"):
        response = httpx.get(f"{proxy.url}{path}")
        # httpx normalises literal dot segments itself, so only encoded ones reach the proxy as such.
        assert response.status_code in (400, 404)
        assert "error" in response.json()
    assert all("admin" not in r.path or r.path.startswith("/v1/") for r in upstream.received)


def test_paths_outside_v1_are_404(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    response = httpx.get(f"{proxy.url}/admin")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert upstream.received == []
