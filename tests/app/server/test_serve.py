"""Readiness and shutdown: SIGTERM stops new connections and drains in-flight streams before exiting."""

from __future__ import annotations

import json
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.app.conftest import ProxyFactory
from tests.support.process import ProxyProcess
from tests.support.servers import LoopbackServer, refuses_connections
from tests.support.upstream import StandInUpstream, sse_chunks

STREAM = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_drains_the_stream_in_flight_then_exits_0(upstream: StandInUpstream, signum: int) -> None:
    upstream.stream_gate.clear()  # the upstream holds the stream after its first chunk
    with ProxyProcess("--upstream", f"{upstream.url}/v1") as proxy:  # type: ignore[attr-defined]
        with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", json=STREAM, timeout=30) as response:
            chunks = response.iter_raw()
            received = next(chunks)
            proxy.terminate(signum)

            deadline = time.monotonic() + 15  # hang guard
            while not refuses_connections(proxy.port):
                assert time.monotonic() < deadline, "still accepting connections after SIGTERM"
                time.sleep(0.05)

            upstream.stream_gate.set()
            received += b"".join(chunks)
        assert proxy.wait() == 0

    assert received == b"".join(sse_chunks("gpt-4o", False))  # whole, [DONE] included
    logged = [json.loads(line) for line in proxy.lines]
    shutdown = [e for e in logged if e["logger"] == "compaction_proxy.server"]
    assert len(shutdown) == 1 and "/readyz answers 503" in shutdown[0]["message"]
    assert not [e for e in logged if e["level"] in ("error", "critical")]


def test_a_stream_still_running_when_the_grace_period_ends_is_cut_with_an_error_event(
    upstream: StandInUpstream,
) -> None:
    upstream.stream_gate.clear()
    try:
        with ProxyProcess("--upstream", f"{upstream.url}/v1", env={"COMPACTION_SHUTDOWN_GRACE_SECONDS": "0"}) as proxy:  # type: ignore[attr-defined]
            with httpx.stream("POST", f"{proxy.url}/v1/chat/completions", json=STREAM, timeout=30) as response:
                chunks = response.iter_raw()
                first = next(chunks)
                proxy.terminate()
                assert proxy.wait() == 0  # exits without waiting for the gate
                rest = b"".join(chunks)  # a whole chunked body: httpx raises on a truncated one
            assert upstream.stream_abandoned.wait(timeout=10)
    finally:
        upstream.stream_gate.set()
    assert first == sse_chunks("gpt-4o", False)[0]
    # The openai SDK raises on an event with an "error" key; no [DONE] follows.
    [event] = [json.loads(line[6:]) for line in rest.decode().splitlines() if line.startswith("data: ")]
    assert event["error"]["code"] == "proxy_shutdown"


def test_readyz_is_200_once_started(proxy: LoopbackServer) -> None:
    response = httpx.get(f"{proxy.url}/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert body["compaction"]["large"] == {
        "threads": 2,
        "running": 0,
        "waiting": 0,
        "waiting_bytes": 0,
        "queue_bytes": 256 * 1024 * 1024,
    }


def test_readyz_is_503_once_shutdown_began(start_proxy: ProxyFactory) -> None:
    with start_proxy() as proxy:
        # What app.server.DrainingServer does first on SIGTERM; over HTTP the window is too short to hit.
        proxy.server.config.app.state.readiness.stop()
        response = httpx.get(f"{proxy.url}/readyz")
        assert httpx.get(f"{proxy.url}/healthz").status_code == 200  # alive, just not taking new work
    assert response.status_code == 503
    assert response.json() == {
        "error": {"message": "The proxy is shutting down.", "type": "server_error", "param": None, "code": "not_ready"}
    }


def test_a_stop_signal_during_a_compaction_ends_it_within_the_grace_period(upstream: StandInUpstream) -> None:
    upstream.summariser_gate.clear()  # the summariser never answers: the compaction waits on its call
    messages = [{"role": "user", "content": f"question {i}"} for i in range(40)]
    env = {"COMPACTION_SHUTDOWN_GRACE_SECONDS": "1"}
    with ProxyProcess("--upstream", f"{upstream.url}/v1", env=env) as proxy, ThreadPoolExecutor(1) as pool:  # type: ignore[attr-defined]
        pending = pool.submit(
            httpx.post,
            f"{proxy.url}/v1/chat/completions",
            json={"model": "gpt-4o", "messages": messages},
            headers={"X-Compaction-Strategies": "notes(budget=50,prepare_at=1)", "Authorization": "Bearer sk-c"},
            timeout=60,
        )
        deadline = time.monotonic() + 15  # hang guard
        while not upstream.summariser_calls:
            assert time.monotonic() < deadline and not pending.done()
            time.sleep(0.02)
        started = time.monotonic()
        proxy.terminate()
        assert proxy.wait(timeout=20) == 0
        took = time.monotonic() - started
        upstream.summariser_gate.set()
    # The grace period and the process's own exit; before, the compaction kept it for the summariser's 60 s.
    assert took < 1 + 6
    assert upstream.received == []  # nothing was forwarded for the cut request
