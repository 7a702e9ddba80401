"""Soak: many mixed requests through the real proxy process to a stand-in upstream, also a process.

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
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from .. import CHECKOUT
from ..processes import Server, answers, free_port, open_fds, server_environment
from .load import idle_reading, load, percentile

# Longer than the idle timeout of the proxy's upstream pool (httpx: 5 s), so that every pooled connection has
# expired before one last request lets the pool close them: what stays open after that is what leaks.
IDLE_SETTLE = 6.0


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
    up_port, proxy_port = free_port(), free_port()
    upstream_base = f"http://127.0.0.1:{up_port}/v1"
    proxy_args = ["--host", "127.0.0.1", "--port", str(proxy_port), "--upstream", upstream_base]
    proxy_args += ["--workers", str(args.workers), "--log-level", "warning"]
    upstream_command = [sys.executable, "-m", "bench.soak.upstream", str(up_port)]
    proxy_command = [sys.executable, "-m", "app", *proxy_args]
    up_ready = answers(f"{upstream_base}/chat/completions", b"{}", timeout=2)
    proxy_ready = answers(f"http://127.0.0.1:{proxy_port}/healthz", timeout=2)

    with tempfile.TemporaryDirectory(prefix="soak-") as scratch:
        upstream_log, proxy_log = Path(scratch, "upstream.log"), Path(scratch, "proxy.log")
        # From the checkout, so both run this tree's code; with none of the caller's configuration.
        server = partial(Server, env=server_environment(), cwd=CHECKOUT, start_timeout=60.0)
        upstream = server("stand-in upstream", upstream_command, upstream_log, up_ready)
        with upstream, server("compaction-proxy", proxy_command, proxy_log, proxy_ready) as proxy:
            url = f"http://127.0.0.1:{proxy_port}/v1/chat/completions"
            fds_start = open_fds(proxy.pid)
            warm = asyncio.run(load(url, args.warmup, args.concurrency, deadline, proxy.pid))
            rss_warm, fds_warm = idle_reading(url, proxy.pid, settle)
            run = asyncio.run(load(url, args.requests, args.concurrency, deadline, proxy.pid))
            rss_end, fds_end = idle_reading(url, proxy.pid, settle)
        proxy_lines = proxy_log.read_text(errors="replace").splitlines()

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
