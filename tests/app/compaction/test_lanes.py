"""Compaction lanes and the deadline (app.compaction.lanes, app.compaction): huge requests cannot starve small
ones, a full large lane answers 503 and shows on /readyz, and a compaction past its deadline forwards the
request as it came.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from app import Settings, create_app
from app.compaction.compactor import INLINE_MAX_MESSAGES
from strategies import BUILTINS, Applied, Context, Message, Params, Registry, Strategy
from tests.app.conftest import ProxyFactory
from tests.support.holding import Holding
from tests.support.servers import LoopbackServer
from tests.support.upstream import StandInUpstream

HOLD = {"X-Compaction-Strategies": "hold"}


def body(size: int = 0) -> dict[str, Any]:
    """A chat request of at least `size` bytes."""
    return {"model": "gpt-4o", "messages": [{"role": "user", "content": "x" * size + "hi"}]}


def test_a_full_large_lane_refuses_more_large_requests_while_small_ones_go_on(
    start_proxy: ProxyFactory, upstream: StandInUpstream
) -> None:
    holding = Holding()
    # One large body may wait, not two.
    lanes = {"large_request_bytes": 100_000, "large_compaction_threads": 1, "large_compaction_queue_bytes": 250_000}
    with start_proxy(holding.registry, **lanes) as proxy, ThreadPoolExecutor(2) as pool:
        url = f"{proxy.url}/v1/chat/completions"
        running = pool.submit(httpx.post, url, json=body(200_000), headers=HOLD, timeout=30)
        holding.wait_entered()
        waiting = pool.submit(httpx.post, url, json=body(200_000), headers=HOLD, timeout=30)
        large = proxy.server.config.app.state.services.compactor.lanes.large
        deadline = time.monotonic() + 10  # hang guard
        while large.waiting != 1:  # until the second one queues
            assert time.monotonic() < deadline
            time.sleep(0.01)
        refused = httpx.post(url, json=body(200_000), headers=HOLD, timeout=30)
        readyz = httpx.get(f"{proxy.url}/readyz")
        small = httpx.post(url, json=body(), timeout=30)  # its own lane: not behind the large ones
        holding.release.set()
        assert running.result().status_code == 200 and waiting.result().status_code == 200
        after = httpx.get(f"{proxy.url}/readyz")
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "compaction_busy"
    assert readyz.status_code == 503 and readyz.json()["error"]["code"] == "saturated"
    assert small.status_code == 200
    assert after.status_code == 200 and after.json()["compaction"]["large"]["running"] == 0
    assert len(upstream.received) == 3  # the refused one never went upstream


def test_past_the_deadline_the_request_goes_upstream_as_it_came(
    start_proxy: ProxyFactory, upstream: StandInUpstream
) -> None:
    holding = Holding()
    raw = json.dumps(body()).encode()
    with start_proxy(holding.registry, compaction_deadline_seconds=0.3) as proxy:
        response = httpx.post(f"{proxy.url}/v1/chat/completions", content=raw, headers=HOLD, timeout=30)
        dry_run = httpx.post(f"{proxy.url}/compact", content=raw, headers=HOLD, timeout=30)
    assert response.status_code == 200
    assert response.headers["x-compaction-fallback"] == "compaction_deadline"
    assert "x-compaction-tokens-before" not in response.headers  # not counted: it stopped first
    assert upstream.last().body == raw
    assert holding.stopped == ["deadline", "deadline"]
    assert dry_run.status_code == 503 and dry_run.json()["error"]["code"] == "compaction_deadline"


def test_waiting_for_a_thread_counts_against_the_deadline(start_proxy: ProxyFactory, upstream: StandInUpstream) -> None:
    holding = Holding()
    # Every body in a thread: the queued one (default chain) would otherwise be compacted inline, below.
    settings = {"compaction_threads": 1, "compaction_deadline_seconds": 60, "inline_compaction_bytes": 0}
    with start_proxy(holding.registry, **settings) as proxy, ThreadPoolExecutor(1) as pool:
        url = f"{proxy.url}/v1/chat/completions"
        held = pool.submit(httpx.post, url, json=body(), headers=HOLD, timeout=30)
        holding.wait_entered()
        proxy.server.config.app.state.services.compactor.deadline_seconds = 0.3
        queued = httpx.post(url, json=body(), timeout=30)  # waits behind the held one, past its deadline
        holding.release.set()
        assert held.result().status_code == 200
    assert queued.status_code == 200 and queued.headers["x-compaction-fallback"] == "compaction_deadline"


def many_messages(count: int) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}] * count}


@pytest.mark.parametrize(
    ("inline_bytes", "cache_url", "request_body", "inline"),
    [
        (64 * 1024, "memory://", body(), True),
        (0, "memory://", body(), False),
        (64 * 1024, "sqlite:///{tmp}/cache.db", body(), False),
        (64 * 1024, "memory://", many_messages(INLINE_MAX_MESSAGES), True),
        # Under the size, but the strategies' work grows with the messages: a thread.
        (64 * 1024, "memory://", many_messages(INLINE_MAX_MESSAGES + 1), False),
    ],
    ids=["small-body-inline", "inline-off", "cache-io-not-inline", "messages-at-the-bound", "too-many-messages"],
)
def test_a_small_body_with_built_in_strategies_never_waits_for_a_thread(
    start_proxy: ProxyFactory,
    upstream: StandInUpstream,
    tmp_path: Path,
    inline_bytes: int,
    cache_url: str,
    request_body: dict[str, Any],
    inline: bool,
) -> None:
    """The only thread is held by a plugin's strategy (plugins always run in a thread); a small request with the
    default chain is compacted on the event loop at once, unless inline compaction is off, a cache does I/O or
    the body has too many messages.
    """
    holding = Holding()
    settings = {
        "compaction_threads": 1,
        "compaction_deadline_seconds": 60,
        "inline_compaction_bytes": inline_bytes,
        "cache_url": cache_url.format(tmp=tmp_path),
    }
    with start_proxy(holding.registry, **settings) as proxy, ThreadPoolExecutor(1) as pool:
        url = f"{proxy.url}/v1/chat/completions"
        held = pool.submit(httpx.post, url, json=body(), headers=HOLD, timeout=30)
        holding.wait_entered()
        proxy.server.config.app.state.services.compactor.deadline_seconds = 0.3
        small = httpx.post(url, json=request_body, timeout=30)
        holding.release.set()
        assert held.result().status_code == 200
    assert small.status_code == 200
    assert ("x-compaction-fallback" in small.headers) is not inline
    assert small.headers["x-compaction-strategies"] == "minify,mask,window"


class BlockParams(Params):
    pass


def blocking_registry(entered: threading.Event, release: threading.Event) -> Registry:
    class Block(Strategy[BlockParams]):
        name = "block"
        params_model = BlockParams
        summary = "Holds the compaction until the test releases it."

        def apply(self, messages: list[Message], ctx: Context) -> Applied:
            entered.set()
            release.wait(timeout=30)
            return Applied(messages)

    return Registry([*BUILTINS, Block])


def test_a_compaction_in_progress_does_not_block_other_requests(upstream: StandInUpstream) -> None:
    entered, release = threading.Event(), threading.Event()
    settings = Settings(upstream_base_url=f"{upstream.url}/v1")  # type: ignore[attr-defined]
    with LoopbackServer(create_app(settings, blocking_registry(entered, release))) as proxy:
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        with ThreadPoolExecutor(1) as pool:
            slow = pool.submit(
                httpx.post, f"{proxy.url}/compact", json=body, headers={"X-Compaction-Strategies": "block"}, timeout=30
            )
            assert entered.wait(timeout=10)
            # The event loop is free while the strategy holds its worker thread.
            assert httpx.get(f"{proxy.url}/healthz", timeout=10).status_code == 200
            assert httpx.post(f"{proxy.url}/v1/chat/completions", json=body, timeout=10).status_code == 200
            release.set()
            assert slow.result().status_code == 200


def test_the_compaction_stops_when_the_client_disconnects(start_proxy: ProxyFactory, upstream: StandInUpstream) -> None:
    holding = Holding()
    payload = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
        f"X-Compaction-Strategies: hold\r\nContent-Length: {len(payload)}\r\n\r\n"
    ).encode()
    # One compaction thread: the next request can only be compacted once the stopped one has given it back.
    with start_proxy(holding.registry, compaction_threads=1) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port)) as client:
            client.sendall(head + payload)
            holding.wait_entered()
        holding.wait_stopped()
        assert holding.stopped == ["cancelled"]
        # The lane's thread is free again: the next request is compacted and answered.
        holding.release.set()
        headers = {"Content-Type": "application/json", "X-Compaction-Strategies": "hold"}
        answer = httpx.post(f"{proxy.url}/v1/chat/completions", content=payload, headers=headers, timeout=10)
        assert answer.status_code == 200 and "x-compaction-fallback" not in answer.headers
    # The disconnected request never went upstream; the next one did, compacted (hold marks its last message).
    [forwarded] = upstream.received
    assert forwarded.json()["messages"] == [{"role": "user", "content": "held"}]
