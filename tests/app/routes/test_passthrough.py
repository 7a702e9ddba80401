"""Every other /v1/* path goes upstream unchanged."""

from __future__ import annotations

import http.client

import httpx
import openai
import pytest

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
    response = httpx.delete(f"{proxy.url}/v1/files/file-abc%3A1")
    assert response.status_code == 404  # the stand-in's own answer, relayed
    assert response.json()["error"]["message"] == "no such route"
    assert upstream.last().method == "DELETE"
    assert upstream.last().path == "/v1/files/file-abc:1"  # the stand-in decodes; the proxy sent it encoded


def test_stored_chat_completions_get_is_passed_through(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    httpx.get(f"{proxy.url}/v1/chat/completions?limit=2")
    assert (upstream.last().method, upstream.last().query) == ("GET", "limit=2")


def raw_request(proxy: LoopbackServer, method: str, path: str, host: str | None = None) -> http.client.HTTPResponse:
    """The path exactly as written: httpx would normalise dot segments and encode backslashes itself."""
    connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    connection.putrequest(method, path, skip_host=host is not None)
    if host is not None:
        connection.putheader("Host", host)
    connection.endheaders()
    response = connection.getresponse()
    response.read()
    connection.close()
    return response


@pytest.mark.parametrize(
    "path",
    [
        "/v1/..%2f..%2fadmin",
        "/v1/files%2F..%2F..%2Fadmin",
        "/v1/%252e%252e/%252e%252e/admin",
        "/v1/..;/admin",
        "/v1/files/.;/..;x/admin",
        "/v1/%2e%2e/admin",
        "/v1/files/.%2E/../admin",
        "/v1/files/../../admin",
        "/v1/files\\..\\..\\admin",
        "/v1/files%5c..%5Cadmin",
        "/v1/files/%c0%ae%c0%ae/admin",
        "/v1/files/a%00b",
    ],
)
def test_paths_that_could_reach_another_upstream_path_are_refused(
    proxy: LoopbackServer, upstream: StandInUpstream, path: str
) -> None:
    response = raw_request(proxy, "GET", path)
    assert response.status == 400
    assert response.getheader("content-type") == "application/json"
    assert upstream.received == []


def test_a_refused_path_says_why_in_openais_shape(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    response = httpx.get(f"{proxy.url}/v1/..%2f..%2fadmin")
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "message": "The path may not contain encoded slashes (%2F).",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_path",
        }
    }
    assert upstream.received == []


@pytest.mark.parametrize(
    ("path", "forwarded"),
    [
        ("/v1/files/file-abc/content", "/v1/files/file-abc/content"),
        ("/v1/models/ft%3Agpt-4o%3Aorg%3A%3Aid", "/v1/models/ft:gpt-4o:org::id"),
        ("/v1/models/ft:gpt-4o:org::id", "/v1/models/ft:gpt-4o:org::id"),
        ("/v1/files?purpose=a%2Fb%25c&after=..", "/v1/files"),
        ("/v1/vector_stores/vs_1/files/file-1.json", "/v1/vector_stores/vs_1/files/file-1.json"),
    ],
)
def test_ordinary_paths_still_pass(proxy: LoopbackServer, upstream: StandInUpstream, path: str, forwarded: str) -> None:
    response = raw_request(proxy, "GET", path)
    assert response.status != 400
    assert upstream.last().path == forwarded
    if "?" in path:
        assert upstream.last().query == path.split("?", 1)[1]  # the query string is not the path: left alone


@pytest.mark.parametrize("path", ["/v1", "/v1?x=1", "/healthz/", "/compact/"])
def test_no_redirect_is_built_from_the_host_header(proxy: LoopbackServer, upstream: StandInUpstream, path: str) -> None:
    response = raw_request(proxy, "GET", path, host="evil.example")
    assert response.getheader("location") is None
    assert 400 <= response.status < 500
    assert response.getheader("content-type") == "application/json"
    assert upstream.received == []


def test_paths_outside_v1_are_404(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    response = httpx.get(f"{proxy.url}/admin")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert upstream.received == []
