"""The request body limit (413) and strict validation of the fields the proxy acts on."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from app.edge.errors import ApiError
from app.wire import parse_object
from tests.app.conftest import ProxyFactory
from tests.support.servers import LoopbackServer
from tests.support.upstream import Canned, StandInUpstream

LIMIT = 4000


@pytest.fixture(scope="module")
def small_server(start_proxy: ProxyFactory) -> Iterator[LoopbackServer]:
    with start_proxy(max_body_bytes=LIMIT) as server:
        yield server


@pytest.fixture
def small(small_server: LoopbackServer, upstream: StandInUpstream) -> LoopbackServer:
    return small_server


def chat_body(size: int) -> bytes:
    """A valid chat request of exactly `size` bytes."""
    empty = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": ""}]}).encode()
    padding = "x" * (size - len(empty))
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": padding}]}).encode()
    assert len(body) == size
    return body


def chunked(body: bytes) -> Iterator[bytes]:
    """Sent with Transfer-Encoding: chunked, so no Content-Length announces the size."""
    yield from (body[i : i + 1000] for i in range(0, len(body), 1000))


def assert_413(response: httpx.Response) -> None:
    assert response.status_code == 413
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "request_too_large"
    assert error["type"] == "invalid_request_error"
    assert str(LIMIT) in error["message"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/compact"])
@pytest.mark.parametrize("send", [bytes, chunked], ids=["content-length", "chunked"])
def test_a_body_over_the_limit_is_a_413_and_nothing_is_sent(
    small: LoopbackServer, upstream: StandInUpstream, path: str, send: object
) -> None:
    assert callable(send)
    response = httpx.post(f"{small.url}{path}", content=send(chat_body(LIMIT + 1)))
    assert_413(response)
    assert upstream.received == []


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/compact"])
@pytest.mark.parametrize("send", [bytes, chunked], ids=["content-length", "chunked"])
def test_a_body_at_the_limit_is_accepted(small: LoopbackServer, path: str, send: object) -> None:
    assert callable(send)
    response = httpx.post(f"{small.url}{path}", content=send(chat_body(LIMIT)))
    assert response.status_code == 200


def test_passthrough_body_announced_over_the_limit_never_reaches_upstream(
    small: LoopbackServer, upstream: StandInUpstream
) -> None:
    response = httpx.post(f"{small.url}/v1/files", content=b"x" * (LIMIT + 1))
    assert_413(response)
    assert upstream.received == []
    assert not upstream.request_abandoned.is_set()  # not even begun


def test_passthrough_chunked_body_over_the_limit_aborts_the_upstream_request(
    small: LoopbackServer, upstream: StandInUpstream
) -> None:
    def slowly() -> Iterator[bytes]:
        for chunk in chunked(b"x" * (LIMIT * 3)):
            yield chunk
            time.sleep(0.05)  # each chunk on its own: the first ones are forwarded before the limit is reached

    response = httpx.post(f"{small.url}/v1/files", content=slowly())
    assert_413(response)
    # The body was streaming upstream as it came; the upstream sees it cut off, never a complete request.
    assert upstream.request_abandoned.wait(timeout=10)
    assert upstream.received == []


def test_passthrough_body_within_the_limit_streams_through(small: LoopbackServer, upstream: StandInUpstream) -> None:
    body = b"y" * LIMIT
    response = httpx.post(f"{small.url}/v1/embeddings", content=chunked(body))
    assert response.status_code == 200
    assert upstream.last().body == body


def nested_body(levels: int, content: str = "hi") -> bytes:
    """A chat body whose deepest container is `levels` deep, the body itself counting as one."""
    nested = "[" * (levels - 1) + "]" * (levels - 1)
    messages = json.dumps([{"role": "user", "content": content}])
    return f'{{"model": "gpt-4o", "messages": {messages}, "metadata": {nested}}}'.encode()


@pytest.mark.parametrize("levels", [65, 300, 1100])
@pytest.mark.parametrize("content", ["hi", "a\ud800b"], ids=["orjson", "stdlib"])  # a lone surrogate: stdlib only
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/compact"])
def test_a_body_nested_too_deep_is_a_400_that_says_the_limit(
    proxy: LoopbackServer, upstream: StandInUpstream, path: str, content: str, levels: int
) -> None:
    response = httpx.post(f"{proxy.url}{path}", content=nested_body(levels, content))
    assert response.status_code == 400
    assert response.json()["error"] == {
        "message": "The request body nests arrays and objects deeper than this proxy accepts (64 levels; setting "
        "max_json_depth).",
        "type": "invalid_request_error",
        "param": None,
        "code": "too_deep",
    }
    assert upstream.received == []


def test_a_body_at_the_depth_limit_is_forwarded_as_sent(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    body = nested_body(64)
    response = httpx.post(f"{proxy.url}/v1/chat/completions", content=body)
    assert response.status_code == 200
    assert upstream.last().body == body


def test_the_depth_limit_is_the_one_given() -> None:
    parse_object(nested_body(10), max_depth=10)
    with pytest.raises(ApiError, match=r"\(10 levels;") as raised:
        parse_object(nested_body(11), max_depth=10)
    assert (raised.value.status, raised.value.code) == (400, "too_deep")


@pytest.mark.parametrize("value", ['"yes"', '"true"', "1", "0", "[]", "{}"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/compact"])
def test_stream_must_be_a_boolean(proxy: LoopbackServer, upstream: StandInUpstream, value: str, path: str) -> None:
    body = '{"model": "gpt-4o", "stream": ' + value + ', "messages": [{"role": "user", "content": "hi"}]}'
    response = httpx.post(f"{proxy.url}{path}", content=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "stream"
    assert error["code"] == "invalid_type"
    assert "'stream'" in error["message"] and "boolean" in error["message"]
    assert upstream.received == []


@pytest.mark.parametrize("value", ["true", "false", "null"])
def test_stream_true_false_or_null_is_forwarded_as_sent(
    proxy: LoopbackServer, upstream: StandInUpstream, value: str
) -> None:
    body = '{"model": "gpt-4o", "stream": ' + value + ', "messages": [{"role": "user", "content": "hi"}]}'
    response = httpx.post(f"{proxy.url}/v1/chat/completions", content=body, headers={"X-Compaction-Strategies": "none"})
    assert response.status_code == 200
    assert upstream.last().body == body.encode()


def test_hop_by_hop_response_headers_are_not_relayed(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    upstream.canned = Canned(
        200,
        b'{"object": "list", "data": []}',
        {
            "content-type": "application/json",
            "connection": "x-upstream-hop",  # names a header that is hop-by-hop for this connection only
            "x-upstream-hop": "1",
            "keep-alive": "timeout=5",
            "proxy-authenticate": "Basic",
            "x-end-to-end": "kept",
        },
    )
    response = httpx.get(f"{proxy.url}/v1/models")
    assert response.status_code == 200
    assert response.headers["x-end-to-end"] == "kept"
    for name in ("x-upstream-hop", "keep-alive", "proxy-authenticate"):
        assert name not in response.headers, name
    assert response.headers.get("connection", "keep-alive") == "keep-alive"


def test_hop_by_hop_request_headers_are_not_forwarded(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    headers = {
        "Connection": "keep-alive, x-client-hop",
        "X-Client-Hop": "1",
        "Keep-Alive": "timeout=5",
        "Proxy-Authorization": "Basic c2VjcmV0",
        "TE": "trailers",
        "X-End-To-End": "kept",
    }
    response = httpx.get(f"{proxy.url}/v1/models", headers=headers)
    assert response.status_code == 200
    received = upstream.last().headers
    assert received["x-end-to-end"] == "kept"
    for name in ("x-client-hop", "keep-alive", "proxy-authorization", "te"):
        assert name not in received, name
