"""What each candidate HTTP client costs the proxy per upstream request, on its own event loop (uvloop, as the
proxy runs), against nginx answering a canned completion on loopback:

    python -m bench.clients                 # about a minute
    python -m bench.clients --seconds 5     # longer runs

Every client posts the same body, reads the answer as the proxy relays it (raw chunks, as they come) and keeps
its connections in a pool, `concurrency` requests in flight at once. Printed: requests a second and CPU
milliseconds per request of this process (user + system), which is what a client adds to every proxied request;
nginx's share of the machine is the same for every client. Candidates not installed are skipped with the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import resource
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..agent_history import agent_history
from ..canned import MODEL
from ..overhead.nginx import NginxUpstream

BODIES = {"2 KB": (6, 1_300), "200 KB": (100, 175_000)}
Send = Callable[[bytes], Awaitable[int]]  # posts the body, reads the answer; returns its size
Client = tuple[Send, Callable[[], Awaitable[None]]]  # and how to close it


@dataclass(frozen=True)
class Row:
    client: str
    body: str
    concurrency: int
    requests: int
    rps: float
    cpu_ms: float


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def relayed(response: Any) -> int:
    """An httpx or httpx2 response read as the proxy relays it (raw chunks, as they come), then closed; its size."""
    size = 0
    async for chunk in response.aiter_raw():
        size += len(chunk)
    await response.aclose()
    return size


async def httpx_like(module_name: str, url: str, connections: int) -> Client:
    module = importlib.import_module(module_name)
    limits = module.Limits(max_connections=connections, max_keepalive_connections=connections)
    client = module.AsyncClient(limits=limits)

    async def send(body: bytes) -> int:
        request = client.build_request("POST", url, content=body, headers={"content-type": "application/json"})
        return await relayed(await client.send(request, stream=True))

    return send, client.aclose


async def aiohttp_client(url: str, connections: int) -> Client:
    import aiohttp

    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=connections), auto_decompress=False, skip_auto_headers=("User-Agent",)
    )

    async def send(body: bytes) -> int:
        async with session.post(url, data=body, headers={"content-type": "application/json"}) as response:
            size = 0
            async for chunk in response.content.iter_any():
                size += len(chunk)
            return size

    return send, session.close


async def httpx_over_aiohttp(url: str, connections: int, *, pooled_client: bool) -> Client:
    """What the proxy ships (app.upstream.transport): httpx's Request and Response over aiohttp, sent through an
    httpx.AsyncClient or, as app.upstream does on the hot path, straight to the transport.
    """
    import httpx

    from app.upstream.transport import AiohttpTransport

    transport = AiohttpTransport(limits=httpx.Limits(max_connections=connections))
    client = httpx.AsyncClient(transport=transport)
    timeout = httpx.Timeout(10.0).as_dict()

    async def send(body: bytes) -> int:
        headers = {"content-type": "application/json"}
        if pooled_client:
            request = client.build_request("POST", url, content=body, headers=headers)
            response = await client.send(request, stream=True)
        else:
            request = httpx.Request("POST", url, content=body, headers=headers, extensions={"timeout": timeout})
            response = await transport.handle_async_request(request)
        return await relayed(response)

    return send, client.aclose


CLIENTS: dict[str, Callable[[str, int], Awaitable[Client]]] = {
    "httpx": lambda url, n: httpx_like("httpx", url, n),
    "httpx2": lambda url, n: httpx_like("httpx2", url, n),
    "aiohttp": aiohttp_client,
    "httpx AsyncClient over app.upstream.transport": lambda url, n: httpx_over_aiohttp(url, n, pooled_client=True),
    "httpx Request over app.upstream.transport": lambda url, n: httpx_over_aiohttp(url, n, pooled_client=False),
}


async def load(send: Send, body: bytes, concurrency: int, seconds: float) -> tuple[int, float, float]:
    """Requests answered, wall seconds, CPU seconds of this process."""
    stop = time.monotonic() + seconds
    done = 0

    async def worker() -> None:
        nonlocal done
        while time.monotonic() < stop:
            await send(body)
            done += 1

    started, cpu = time.monotonic(), cpu_seconds()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done, time.monotonic() - started, cpu_seconds() - cpu


async def measure(name: str, url: str, bodies: dict[str, bytes], levels: list[int], seconds: float) -> list[Row]:
    send, close = await CLIENTS[name](url, max(levels))
    rows = []
    try:
        for label, body in bodies.items():
            await load(send, body, 4, 0.5)  # fills the pool
            for concurrency in levels:
                done, wall, cpu = await load(send, body, concurrency, seconds)
                rows.append(Row(name, label, concurrency, done, done / wall, 1000 * cpu / done))
    finally:
        await close()
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.clients", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--seconds", type=float, default=3.0, help="per run (default 3)")
    parser.add_argument("--concurrency", default="1,16", help="comma-separated (default 1,16)")
    parser.add_argument("--clients", default=",".join(CLIENTS), help=f"comma-separated (default {','.join(CLIENTS)})")
    args = parser.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",")]
    bodies = {
        label: json.dumps({"model": MODEL, "messages": agent_history(*shape)}).encode()
        for label, shape in BODIES.items()
    }
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    rows: list[Row] = []
    with NginxUpstream() as nginx:
        url = f"{nginx.json_base}/chat/completions"
        for name in args.clients.split(","):
            try:
                rows += asyncio.run(measure(name, url, bodies, levels, args.seconds))
            except ImportError as exc:
                print(f"{name}: not installed ({exc})")
    print(f"command: python -m bench.clients {' '.join(argv or [])}".rstrip())
    print()
    print("| client | body | conc. | req/s | CPU ms per request |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r.client} | {r.body} | {r.concurrency} | {r.rps:,.0f} | {r.cpu_ms:.3f} |")
