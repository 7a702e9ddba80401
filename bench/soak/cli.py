"""Soak: many mixed requests through the real proxy process to the tests' stand-in upstream, also a process.

    python -m bench.soak                                     # 20,000 requests at concurrency 100
    python -m bench.soak --requests 2000 --concurrency 50 --workers 2
    python -m bench.soak --smoke                             # a few hundred, for the smoke test

Half the requests stream; half carry a coding agent's history big enough for the default chain to compact.
Prints the errors (anything but a whole 200 answer; they must be 0), p50/p99 latency, the proxy's resident
memory after the warm-up, under load and at the end, and its open file descriptors at start, after the warm-up
and at the end, read while idle once its pooled upstream connections have expired. With --workers the
supervisor and all workers are counted. Bounded: a fixed count, a timeout per request and --max-seconds for
the whole run; both servers are always stopped. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

from .. import CHECKOUT
from ..agent_history import agent_history

REQUEST_TIMEOUT = 60.0
# Longer than the idle timeout of the proxy's upstream pool (httpx: 5 s), so that every pooled connection has
# expired before one last request lets the pool close them: what stays open after that is what leaks.
IDLE_SETTLE = 6.0
# The tests' stand-in upstream, served by uvicorn; it keeps only its last requests, not all 20,000.
UPSTREAM = (
    "import collections, sys, uvicorn\n"
    "from tests.support.upstream import StandInUpstream\n"
    "upstream = StandInUpstream()\n"
    "upstream.received = collections.deque(maxlen=16)\n"
    "uvicorn.run(upstream.app, host='127.0.0.1', port=int(sys.argv[1]), log_level='warning', access_log=False)\n"
)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def server(args: list[str], url: str, log: IO[bytes], env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """A child process answering GET url, stopped with SIGTERM (then SIGKILL) with all its processes."""
    # A session of its own, so the stop reaches every worker of a `--workers` proxy.
    process = subprocess.Popen(args, cwd=CHECKOUT, stdout=log, stderr=log, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url, timeout=2)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{args[:4]} did not start; see {log.name}") from None
                time.sleep(0.1)
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def process_tree(pid: int) -> list[int]:
    """pid and every process below it (the workers of a supervisor)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # Field 4 of /proc/PID/stat is the parent; the command name before it may contain spaces.
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue  # the process has just ended
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo.extend(parents.get(found[-1], []))
    return found


def rss_bytes(pid: int) -> int:
    total = 0
    for each in process_tree(pid):
        for line in Path(f"/proc/{each}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total


def open_fds(pid: int) -> int:
    return sum(len(os.listdir(f"/proc/{each}/fd")) for each in process_tree(pid))


def idle_reading(url: str, pid: int, settle: float) -> tuple[int, int]:
    """The proxy's RSS and open descriptors once idle, its expired upstream connections closed."""
    time.sleep(settle)
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "Say hello."}]})
    httpx.post(url, content=body, headers={"content-type": "application/json"}, timeout=REQUEST_TIMEOUT)
    time.sleep(0.5)
    return rss_bytes(pid), open_fds(pid)


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
                    result.rss.append(rss_bytes(pid))

        await asyncio.gather(*(sender() for _ in range(concurrency)))
    result.seconds = time.perf_counter() - started
    return result


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000, method="inclusive")[round(q * 1000) - 1] if len(values) > 1 else 0.0


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000, help="requests after the warm-up (20000)")
    parser.add_argument("--concurrency", type=int, default=100, help="requests in flight at once (100)")
    parser.add_argument("--warmup", type=int, default=1_000, help="requests before the first reading (1000)")
    parser.add_argument("--workers", type=int, default=1, help="the proxy's --workers (1)")
    parser.add_argument("--max-seconds", type=float, default=900, help="stop sending after this long (900)")
    parser.add_argument("--smoke", action="store_true", help="tiny: 200 requests at concurrency 10, 20 warm-up")
    args = parser.parse_args(argv)
    settle = IDLE_SETTLE
    if args.smoke:
        # Descriptor counts of a smoke run are read without waiting for the pool to expire: nobody reads them.
        args.requests, args.concurrency, args.warmup, settle = 200, 10, 20, 0.5
    deadline = time.monotonic() + args.max_seconds
    # Nothing of the caller's configuration may change what is measured.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPACTION_", "PROMETHEUS_"))}
    up_port, proxy_port = free_port(), free_port()
    proxy_args = ["--host", "127.0.0.1", "--port", str(proxy_port), "--upstream", f"http://127.0.0.1:{up_port}/v1"]
    proxy_args += ["--workers", str(args.workers), "--log-level", "warning"]
    upstream_command = [sys.executable, "-c", UPSTREAM, str(up_port)]
    proxy_command = [sys.executable, "-m", "app", *proxy_args]
    up_ready, proxy_ready = f"http://127.0.0.1:{up_port}/v1/models", f"http://127.0.0.1:{proxy_port}/healthz"

    with tempfile.TemporaryDirectory(prefix="soak-") as scratch:
        up_log, proxy_log = open(Path(scratch, "upstream.log"), "wb"), open(Path(scratch, "proxy.log"), "wb")
        with (
            up_log,
            proxy_log,
            server(upstream_command, up_ready, up_log, env),
            server(proxy_command, proxy_ready, proxy_log, env) as proxy,
        ):
            url = f"http://127.0.0.1:{proxy_port}/v1/chat/completions"
            fds_start = open_fds(proxy.pid)
            warm = asyncio.run(load(url, args.warmup, args.concurrency, deadline, proxy.pid))
            rss_warm, fds_warm = idle_reading(url, proxy.pid, settle)
            run = asyncio.run(load(url, args.requests, args.concurrency, deadline, proxy.pid))
            rss_end, fds_end = idle_reading(url, proxy.pid, settle)
        proxy_lines = Path(scratch, "proxy.log").read_text(errors="replace").splitlines()

    errors = warm.errors + run.errors
    latencies = sorted(run.latencies)
    processes = "1 process" if args.workers == 1 else f"{args.workers} workers"
    print(f"soak: {args.requests} requests (half streamed, half agent histories) at concurrency {args.concurrency}")
    print(f"      through compaction-proxy ({processes}) to the stand-in upstream, after {args.warmup} warm-up")
    print(f"warm-up: {args.warmup} requests in {warm.seconds:.1f} s")
    print(f"requests: {len(latencies)} in {run.seconds:.1f} s ({len(latencies) / max(run.seconds, 1e-9):.0f}/s)")
    print(f"errors: {sum(errors.values())}" + "".join(f"\n  {n} x {what}" for what, n in errors.most_common()))
    if warm.unsent or run.unsent:
        print(f"not sent (--max-seconds reached): {warm.unsent + run.unsent}")
    print(
        f"latency: p50 {percentile(latencies, 0.5) * 1000:.1f} ms, p99 {percentile(latencies, 0.99) * 1000:.1f} ms,"
        f" max {latencies[-1] * 1000 if latencies else 0:.1f} ms"
    )
    print(f"proxy RSS: after warm-up {mib(rss_warm)}, at the end {mib(rss_end)} ({(rss_end - rss_warm) / 2**20:+.1f})")
    tenths = ", ".join(f"{n / 2**20:.0f}" for n in run.rss)
    print(f"proxy RSS under load, after each tenth of the requests: {tenths} MiB")
    print(f"proxy open fds (idle): at start {fds_start}, after warm-up {fds_warm}, at the end {fds_end}")
    print(f"proxy log lines at warning or above: {len(proxy_lines)}")
    for line in proxy_lines[:5]:
        print(f"  {line[:200]}")
    return 0 if not errors and not warm.unsent and not run.unsent else 1


if __name__ == "__main__":
    sys.exit(main())
