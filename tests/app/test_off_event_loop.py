"""Compaction runs in a worker thread: a slow or huge request never stalls other connections."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx

from app import Settings, create_app
from strategies import BUILTINS, Context, Message, Params, Registry, Strategy
from tests.support.servers import LoopbackServer
from tests.support.upstream import StandInUpstream


class BlockParams(Params):
    pass


def blocking_registry(entered: threading.Event, release: threading.Event) -> Registry:
    class Block(Strategy[BlockParams]):
        name = "block"
        params_model = BlockParams
        summary = "Holds the compaction until the test releases it."

        def apply(self, messages: list[Message], ctx: Context) -> list[Message]:
            entered.set()
            release.wait(timeout=30)
            return messages

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
