"""Client connections on real sockets, served as the CLI serves the proxy (app.server.serve.server_config): a
request head has a deadline and a size limit, idle sockets cannot lock clients out, a stalled body is answered 408,
and every error the protocol layer answers is JSON in OpenAI's shape. Timings are only hang guards.
"""

from __future__ import annotations

import asyncio
import json
import resource
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from app import Settings, create_app
from app.server.connections import H11Limited
from app.server.httptools import HttpToolsLimited
from tests.support.process import ProxyProcess
from tests.support.servers import LoopbackServer
from tests.support.upstream import StandInUpstream

HANG_GUARD = 20.0  # seconds; far past any limit set here
SHORT = 0.5  # the head and body timeouts of these tests
PROTOCOLS = pytest.mark.parametrize("http", [HttpToolsLimited, H11Limited], ids=["httptools", "h11"])
Serve = Callable[..., AbstractContextManager[LoopbackServer]]


@pytest.fixture
def serve(upstream: StandInUpstream) -> Serve:
    @contextmanager
    def serve(http: type[asyncio.Protocol] = HttpToolsLimited, **overrides: Any) -> Iterator[LoopbackServer]:
        where = {"upstream_base_url": f"{upstream.url}/v1", "anthropic_base_url": upstream.url}  # type: ignore[attr-defined]
        settings = Settings(**{**where, **overrides})
        with LoopbackServer(create_app(settings), settings, http=http) as server:
            yield server

    return serve


def connect(server: LoopbackServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=HANG_GUARD)


def until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a hang guard timeout fails the test)."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    sock.close()
    return received


def anthropic_error_of(raw: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    answer = json.loads(body)
    assert answer["type"] == "error" and set(answer) == {"type", "error"}
    return int(head.split(b" ", 2)[1]), answer["error"]


def error_of(raw: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"content-type: application/json" in head.lower()
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return status, error


@PROTOCOLS
def test_a_head_that_never_ends_is_answered_408_and_closed(serve: Serve, http: type[asyncio.Protocol]) -> None:
    with serve(http, request_head_timeout_seconds=SHORT, keep_alive_seconds=60) as proxy:
        sock = connect(proxy)
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Ty")
        status, error = error_of(until_closed(sock))
    assert status == 408
    assert error["code"] == "request_timeout"
    assert "request_head_timeout_seconds" in error["message"]


@PROTOCOLS
def test_a_connection_that_sends_nothing_is_closed(serve: Serve, http: type[asyncio.Protocol]) -> None:
    with serve(http, request_head_timeout_seconds=SHORT, keep_alive_seconds=60) as proxy:
        assert until_closed(connect(proxy)) == b""  # nothing to answer: just closed


@PROTOCOLS
def test_on_a_kept_alive_connection_the_deadline_starts_with_the_next_request(
    serve: Serve, http: type[asyncio.Protocol]
) -> None:
    with serve(http, request_head_timeout_seconds=SHORT, keep_alive_seconds=60) as proxy:
        sock = connect(proxy)
        request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        sock.sendall(request)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
        threading.Event().wait(SHORT * 3)  # idle for longer than the head deadline: keep_alive_seconds applies
        sock.sendall(request)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # half of the third request's head
        status, _ = error_of(until_closed(sock))
    assert status == 408


@PROTOCOLS
def test_a_head_begun_behind_pipelined_requests_has_the_deadline_too(
    serve: Serve, http: type[asyncio.Protocol]
) -> None:
    with serve(http, request_head_timeout_seconds=SHORT, keep_alive_seconds=60) as proxy:
        sock = connect(proxy)
        request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        sock.sendall(request + request + b"GET /hea")  # two requests and the start of a third, in one write
        answers = until_closed(sock)
    assert answers.count(b"HTTP/1.1 200 ") == 2
    assert error_of(answers[answers.rindex(b"HTTP/1.1 ") :])[0] == 408


@PROTOCOLS
def test_a_100_kb_header_is_a_431_and_nothing_goes_upstream(
    serve: Serve, upstream: StandInUpstream, http: type[asyncio.Protocol]
) -> None:
    with serve(http) as proxy:
        sock = connect(proxy)
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n")
        status, error = error_of(until_closed(sock))
        # Just under the limit (64 KiB for the whole head) is an ordinary request.
        fine = httpx.get(f"{proxy.url}/v1/models", headers={"X-Big": "a" * 60_000})
    assert status == 431
    assert error["code"] == "request_header_too_large"
    assert "65536 bytes; setting max_header_bytes" in error["message"]
    assert fine.status_code == 200
    assert len(upstream.received) == 1


def test_a_head_sent_a_little_at_a_time_is_cut_at_the_limit(serve: Serve) -> None:
    with serve(max_header_bytes=4096) as proxy:
        sock = connect(proxy)
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        for i in range(1000):  # 20 KB of headers, one write each; the server reads on, discarding, once it answered
            sock.sendall(b"X-Header-%03d: value\r\n" % i)
        assert error_of(until_closed(sock))[0] == 431


def test_a_body_after_a_head_under_the_limit_is_not_counted(serve: Serve, upstream: StandInUpstream) -> None:
    with serve(max_header_bytes=4096) as proxy:
        response = httpx.post(f"{proxy.url}/v1/embeddings", content=b"x" * 1_000_000)
    assert response.status_code == 200
    assert len(upstream.last().body) == 1_000_000


def test_idle_sockets_past_the_limit_cannot_lock_clients_out(serve: Serve) -> None:
    with serve(max_client_connections=50) as proxy:
        idle = [connect(proxy) for _ in range(200)]
        assert httpx.get(f"{proxy.url}/healthz").status_code == 200
        # The longest-waiting were closed to make room: at most 50 are left open.
        closed = [sock for sock in idle[:150] if until_closed(sock) == b""]
        for sock in idle[150:]:
            sock.close()
    assert len(closed) == 150


def test_past_the_limit_with_every_connection_busy_a_new_one_gets_a_503(
    serve: Serve, upstream: StandInUpstream
) -> None:
    upstream.answer_gate.clear()  # the upstream holds every request: both connections stay busy
    try:
        with serve(max_client_connections=2) as proxy:
            busy = [connect(proxy) for _ in range(2)]
            for sock in busy:
                sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
            while len(upstream.received) < 2:
                threading.Event().wait(0.01)
            status, error = error_of(until_closed(connect(proxy)))
            upstream.answer_gate.set()
            answers = [sock.recv(65536) for sock in busy]
    finally:
        upstream.answer_gate.set()
    assert status == 503
    assert error["code"] == "too_many_connections" and error["type"] == "server_error"
    assert all(answer.startswith(b"HTTP/1.1 200 ") for answer in answers)


@PROTOCOLS
def test_a_malformed_request_is_a_400_in_openais_shape(serve: Serve, http: type[asyncio.Protocol]) -> None:
    with serve(http) as proxy:
        sock = connect(proxy)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
        status, error = error_of(until_closed(sock))
    assert status == 400
    assert error == {
        "message": "Invalid HTTP request received.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_http_request",
    }


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/files"])  # buffered, and streamed upstream
def test_a_body_that_stalls_is_answered_408_and_closed(serve: Serve, upstream: StandInUpstream, path: str) -> None:
    with serve(request_body_timeout_seconds=SHORT) as proxy:
        sock = connect(proxy)
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n".encode() + b'{"model"')
        status, error = error_of(until_closed(sock))
    assert status == 408
    assert error["code"] == "request_timeout"
    assert "request_body_timeout_seconds" in error["message"]
    assert upstream.received == []


def open_files_limit(pid: int) -> int:
    [line] = [
        line for line in Path(f"/proc/{pid}/limits").read_text().splitlines() if line.startswith("Max open files")
    ]
    return int(line.split()[3])


@pytest.mark.parametrize("connections", [2048, 100_000_000], ids=["fits", "past the hard limit"])
def test_at_start_up_the_open_file_limit_is_raised_for_the_connections(
    upstream: StandInUpstream, connections: int
) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    needed = connections + 512 + 2048 + 256  # the client connections, the upstream pool, the backlog, spare
    expected = needed if hard == resource.RLIM_INFINITY else min(needed, hard)

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))  # a common default soft limit (systemd)

    env = {"COMPACTION_UPSTREAM_BASE_URL": f"{upstream.url}/v1", "COMPACTION_MAX_CLIENT_CONNECTIONS": str(connections)}  # type: ignore[attr-defined]
    with ProxyProcess(env=env, preexec=lower) as proxy:
        assert proxy.process is not None
        assert open_files_limit(proxy.process.pid) == expected
    logged = [json.loads(line) for line in proxy.lines if "RLIMIT_NOFILE" in line]
    assert (
        logged[0]["message"]
        == f"raised the open-file limit (RLIMIT_NOFILE) from 1024 to {expected} for client connections"
    )
    assert [e["level"] for e in logged] == (["info"] if expected == needed else ["info", "warning"])


@PROTOCOLS
def test_on_the_messages_route_the_protocol_layer_answers_in_anthropics_shape(
    serve: Serve, upstream: StandInUpstream, http: type[asyncio.Protocol]
) -> None:
    with serve(http, request_body_timeout_seconds=SHORT) as proxy:
        big = connect(proxy)
        big.sendall(b"POST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n")
        malformed = connect(proxy)
        malformed.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
        stalled = connect(proxy)
        stalled.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        answers = [anthropic_error_of(until_closed(sock)) for sock in (big, malformed, stalled)]
    assert [status for status, _ in answers] == [431, 400, 408]
    assert [error["type"] for _, error in answers] == [
        "invalid_request_error",
        "invalid_request_error",
        "timeout_error",
    ]
    assert "max_header_bytes" in answers[0][1]["message"]
    assert upstream.received == []
