"""The soak's traffic: a fixed rotation of small chats and agent histories, plain and streamed, sent by an httpx
async client holding at most `concurrency` connections; each answer checked whole.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..agent_history import agent_history
from ..processes import memory_bytes, open_fds

REQUEST_TIMEOUT = 60.0


def request_bodies() -> list[tuple[bytes, bool]]:
    """(body, streams) in a fixed rotation: small chat and agent history, each plain and streamed."""
    small = [{"role": "user", "content": "Say hello."}]
    # Different sizes, so the token-count cache holds several conversations; all over the default
    # shorten_tools budget (100,000 characters of tool traffic), so compaction runs every time.
    agents = [agent_history(60 + 10 * i, 150_000 + 10_000 * i, seed=i) for i in range(4)]
    bodies = []
    for index, messages in enumerate([small, agents[0], small, agents[1], small, agents[2], small, agents[3]]):
        for stream in (False, True):
            body: dict[str, Any] = {"model": "gpt-4o", "messages": messages, "stream": stream}
            if stream and index % 4 == 0:
                body["stream_options"] = {"include_usage": True}
            bodies.append((json.dumps(body).encode(), stream))
    return bodies


@dataclass
class Load:
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    unsent: int = 0
    seconds: float = 0.0
    rss: list[int] = field(default_factory=list)  # the proxy's, after each tenth of the requests


async def one(client: httpx.AsyncClient, url: str, body: bytes, stream: bool) -> str | None:
    """Sends one request; None if the answer was whole, else what was wrong with it."""
    headers = {"content-type": "application/json", "authorization": "Bearer sk-soak"}
    try:
        async with client.stream("POST", url, content=body, headers=headers) as response:
            data = await response.aread()
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"[:160]
    if response.status_code != 200:
        return f"status {response.status_code}"
    if "x-compaction-tokens-after" not in response.headers:
        return "no compaction headers"
    if stream:
        return None if data.endswith(b"data: [DONE]\n\n") else "stream ended without [DONE]"
    return None if json.loads(data).get("object") == "chat.completion" else "not a chat completion"


async def load(url: str, count: int, concurrency: int, deadline: float, pid: int) -> Load:
    bodies = request_bodies()
    result = Load()
    tenth = max(1, count // 10)
    next_index = iter(range(count))
    started = time.perf_counter()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=REQUEST_TIMEOUT) as client:

        async def sender() -> None:
            for index in next_index:
                if time.monotonic() > deadline:
                    result.unsent += 1
                    continue
                body, stream = bodies[index % len(bodies)]
                begun = time.perf_counter()
                problem = await one(client, url, body, stream)
                result.latencies.append(time.perf_counter() - begun)
                if problem is not None:
                    result.errors[problem] += 1
                if len(result.latencies) % tenth == 0:
                    # Under load, so a steady climb (a leak) shows apart from caches and buffers filling once.
                    result.rss.append(memory_bytes(pid, "VmRSS"))

        await asyncio.gather(*(sender() for _ in range(concurrency)))
    result.seconds = time.perf_counter() - started
    return result


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000, method="inclusive")[round(q * 1000) - 1] if len(values) > 1 else 0.0


def idle_reading(url: str, pid: int, settle: float) -> tuple[int, int]:
    """The proxy's RSS and open descriptors once idle, its expired upstream connections closed."""
    time.sleep(settle)
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "Say hello."}]})
    httpx.post(url, content=body, headers={"content-type": "application/json"}, timeout=REQUEST_TIMEOUT)
    time.sleep(0.5)
    return memory_bytes(pid, "VmRSS"), open_fds(pid)
