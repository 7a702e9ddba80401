"""`--workers N`: the real CLI with a supervisor and worker processes on loopback, against the stand-in."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.server.workers import flag_environment
from app.settings import Settings
from tests.support.metrics import scrape
from tests.support.process import ProxyProcess
from tests.support.servers import refuses_connections
from tests.support.upstream import StandInUpstream, sse_chunks

KEY = "sk-proxy-key-for-workers-7f3a"  # reaches the workers only through the environment they inherit
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
STREAM = {**CHAT, "stream": True}
AUTH = {"authorization": f"Bearer {KEY}"}


def handled(proxy: ProxyProcess, request_ids: set[str]) -> list[int]:
    """The process that logged handling each of these requests, once every one of them has logged it: the lines are
    read by a thread of their own, and may come in a little after the answer.
    """
    served: list[tuple[str, int]] = []

    def logged() -> bool:
        entries = [json.loads(line) for line in proxy.lines]
        chat = [e for e in entries if e["logger"] == "compaction_proxy.chat" and e["request_id"] in request_ids]
        served[:] = [(e["request_id"], e["pid"]) for e in chat]
        return {request_id for request_id, _ in served} == request_ids

    proxy.wait_for(logged, what=f"the log lines of {len(request_ids)} requests")
    return [pid for _, pid in served]


def worker_pids(proxy: ProxyProcess, request_ids: set[str]) -> set[int]:
    """The processes that logged handling these requests."""
    return set(handled(proxy, request_ids))


def chat(proxy: ProxyProcess) -> str:
    request_id = uuid.uuid4().hex
    # A new connection for every request, so the kernel hands each one to whichever worker accepts first.
    response = httpx.post(
        f"{proxy.url}/v1/chat/completions", json=CHAT, headers={**AUTH, "x-request-id": request_id}, timeout=30
    )
    assert response.status_code == 200, response.text
    return request_id


def until_both_workers_answered(proxy: ProxyProcess) -> set[str]:
    """Sends requests, 16 at a time, until two different workers have answered; the ids of all of them."""
    sent: set[str] = set()
    deadline = time.monotonic() + 60  # bounded: the second worker may still be starting
    with ThreadPoolExecutor(16) as pool:
        while len(worker_pids(proxy, sent)) < 2:
            assert time.monotonic() < deadline and len(sent) < 2000, "only one worker ever answered"
            sent.update(pool.map(lambda _: chat(proxy), range(16)))
    return sent


def test_a_burst_of_keep_alive_connections_is_spread_over_the_workers(upstream: StandInUpstream) -> None:
    """16 connections opened at once, as a load balancer's pool opens them, then one request on each: every worker
    gets a share. On one shared listening socket the worker woken first accepted them all, often every one.
    """
    args = ("--upstream", f"{upstream.url}/v1", "--workers", "2")  # type: ignore[attr-defined]
    with ProxyProcess(*args, env={"COMPACTION_API_KEYS": KEY}) as proxy:
        until_both_workers_answered(proxy)  # both are serving
        connections = [http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30) for _ in range(16)]
        for connection in connections:
            connection.connect()
        sent = set()
        for connection in connections:
            request_id = uuid.uuid4().hex
            connection.request("POST", "/v1/chat/completions", json.dumps(CHAT), {**AUTH, "x-request-id": request_id})
            response = connection.getresponse()
            assert response.status == 200
            response.read()
            sent.add(request_id)
        for connection in connections:
            connection.close()
        served = handled(proxy, sent)
    assert len(served) == 16
    # The kernel hashes each connection to a worker's socket: both get at least 2 (fails with p = 34 / 2**16).
    assert len(set(served)) == 2 and min(served.count(pid) for pid in set(served)) >= 2


def test_two_workers_share_the_port_and_metrics_count_both(upstream: StandInUpstream, tmp_path: Path) -> None:
    # An operator's metrics directory, holding a file of an earlier run, unreadable if it were left there.
    shared = tmp_path / "metrics"
    shared.mkdir()
    (shared / "counter_1.db").write_bytes(b"left over from an earlier run")
    env = {"COMPACTION_API_KEYS": KEY, "PROMETHEUS_MULTIPROC_DIR": str(shared)}
    args = ("--upstream", f"{upstream.url}/v1", "--workers", "2")  # type: ignore[attr-defined]
    with ProxyProcess(*args, env=env) as proxy:
        assert httpx.post(f"{proxy.url}/v1/chat/completions", json=CHAT).status_code == 401  # the key reached them
        sent = until_both_workers_answered(proxy)
        pids = worker_pids(proxy, sent)
        assert proxy.process is not None and proxy.process.pid not in pids  # the supervisor serves nothing

        # Whichever worker answers the scrape, it reports the requests of both.
        for _ in range(6):
            samples = scrape(proxy.url)
            assert samples.get("compaction_proxy_requests_total", route="/v1/chat/completions", status="200") == len(
                sent
            )
        proxy.terminate()
        assert proxy.wait() == 0

    logged = [json.loads(line) for line in proxy.lines]  # every line JSON, workers' included
    assert not [e for e in logged if e["level"] in ("error", "critical")]
    assert not [line for line in proxy.lines if KEY in line]


def test_sigterm_drains_streams_in_flight_on_every_worker_and_exits_0(upstream: StandInUpstream) -> None:
    upstream.stream_gate.clear()  # every stream stops after its first chunk until the gate opens
    args = ("--upstream", f"{upstream.url}/v1", "--workers", "2")  # type: ignore[attr-defined]
    with ProxyProcess(*args) as proxy, ThreadPoolExecutor(16) as pool:
        until_both_workers_answered(proxy)
        opened: list[tuple[str, Any]] = []

        def open_stream() -> tuple[str, Any]:
            request_id = uuid.uuid4().hex
            request = httpx.Request(
                "POST", f"{proxy.url}/v1/chat/completions", json=STREAM, headers={"x-request-id": request_id}
            )
            client = httpx.Client(timeout=30)
            response = client.send(request, stream=True)
            chunks = response.iter_raw()
            return request_id, (client, response, chunks, next(chunks))

        deadline = time.monotonic() + 60
        while len(worker_pids(proxy, {rid for rid, _ in opened})) < 2:
            assert time.monotonic() < deadline, "the streams never spread over both workers"
            opened.extend(pool.map(lambda _: open_stream(), range(8)))

        proxy.terminate()
        deadline = time.monotonic() + 15
        while not refuses_connections(proxy.port):
            assert time.monotonic() < deadline, "still accepting connections after SIGTERM"
            time.sleep(0.05)
        upstream.stream_gate.set()
        for _, (client, response, chunks, first) in opened:
            assert first + b"".join(chunks) == b"".join(sse_chunks("gpt-4o", False))  # whole, [DONE] included
            response.close()
            client.close()
        assert proxy.wait() == 0


def test_flags_reach_the_workers_as_the_environment_settings_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    overrides = {"host": "0.0.0.0", "port": 9001, "upstream_base_url": "http://llm:8000/v1", "log_format": "text"}
    monkeypatch.setenv("COMPACTION_PORT", "7000")  # a flag wins over the operator's environment, as in the CLI
    monkeypatch.setenv("COMPACTION_LOG_LEVEL", "warning")  # and what no flag set stays as the environment says
    for name, value in flag_environment(overrides).items():
        monkeypatch.setenv(name, value)
    assert Settings().model_dump() == Settings(**overrides).model_dump()
    assert Settings().log_level == "warning"


def test_zero_workers_is_refused_before_anything_starts() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPACTION_")}
    result = subprocess.run(
        [sys.executable, "-m", "app", "--workers", "0"], capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 1
    assert "workers: Input should be greater than or equal to 1" in result.stderr
