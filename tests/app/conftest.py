from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import openai
import pytest
import redis

from app import Settings, create_app
from strategies import Registry
from strategies.refs import EXPAND_TOOL, refs_in
from tests.support.redis_server import redis_server
from tests.support.scripted_model import ScriptedModel, Turn
from tests.support.servers import LoopbackServer
from tests.support.upstream import StandInUpstream

ProxyFactory = Callable[..., AbstractContextManager[LoopbackServer]]


@pytest.fixture(scope="session")
def standin() -> Iterator[StandInUpstream]:
    upstream = StandInUpstream()
    with LoopbackServer(upstream.app) as server:
        upstream.url = server.url  # type: ignore[attr-defined]
        yield upstream


@pytest.fixture
def upstream(standin: StandInUpstream) -> Iterator[StandInUpstream]:
    standin.reset()
    yield standin
    standin.reset()


@pytest.fixture(scope="session")
def start_proxy(standin: StandInUpstream) -> ProxyFactory:
    """Start a proxy on loopback with settings overrides; by default forwarding to the stand-in."""

    @contextmanager
    def start(registry: Registry | None = None, **overrides: Any) -> Iterator[LoopbackServer]:
        where = {"upstream_base_url": f"{standin.url}/v1", "anthropic_base_url": standin.url}  # type: ignore[attr-defined]
        settings = Settings(**{**where, **overrides})
        # Served as the CLI serves it: the proxy's own protocol class and client limits.
        with LoopbackServer(create_app(settings, registry=registry), settings) as server:
            yield server

    return start


@pytest.fixture(scope="session")
def proxy_server(start_proxy: ProxyFactory) -> Iterator[LoopbackServer]:
    with start_proxy() as server:
        yield server


@pytest.fixture
def proxy(proxy_server: LoopbackServer, upstream: StandInUpstream) -> LoopbackServer:
    return proxy_server


@pytest.fixture
def client(proxy: LoopbackServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-test-key", max_retries=0)


@pytest.fixture(scope="session")
def redis_session() -> Iterator[str]:
    with redis_server() as url:
        yield url


@pytest.fixture
def redis_url(redis_session: str) -> str:
    """A real Redis server's URL, emptied for each test."""
    client = redis.Redis.from_url(redis_session)
    client.flushdb()
    client.close()
    return redis_session


def expand_twice(payload: dict[str, Any]) -> Turn:
    """A model that expands the oldest stub, then asks for the same ref again (a re-expansion), then answers."""
    messages = payload["messages"]
    last = messages[-1]
    offered = any(t.get("function", {}).get("name") == EXPAND_TOOL for t in payload.get("tools") or [])
    stubs = [r for m in messages if m["role"] == "tool" for r in refs_in(m["content"] or "")]
    if last["role"] == "tool" and last["tool_call_id"] == "call_x1" and offered:
        return Turn(text="Again.", calls=[("call_x2", EXPAND_TOOL, json.dumps({"ref": stubs[0]}))])
    if last["role"] == "tool" and last["tool_call_id"].startswith("call_x"):
        return Turn(text="Done.")
    if stubs and offered:
        return Turn(text="Let me look.", calls=[("call_x1", EXPAND_TOOL, json.dumps({"ref": stubs[0]}))])
    return Turn(text="Done.")


@pytest.fixture
def expanding() -> Iterator[str]:
    """The base URL (with /v1) of a scripted model that expands a stub twice (expand_twice)."""
    model = ScriptedModel(expand_twice)
    with LoopbackServer(model.app) as server:
        yield f"{server.url}/v1"
