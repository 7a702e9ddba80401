"""Hostile input: a model flooding the expand tool, and an SSE event that never ends (issue 23).

    python -m bench.hostile                          # floods of 2,000 and 8,000 calls on a 0.9 MB request
    python -m bench.hostile --stream --workers 2     # the same, streamed, through two worker processes
    python -m bench.hostile --smoke                  # tiny, for the smoke test

The flood: the stand-in model (bench/hostile/upstream.py, a process of its own) answers every request that offers
the expand tool with N parallel calls of it on one ref, as a buggy or prompt-injected model may: all the same call,
or each asking for a line of its own (so that none is a repeat). The proxy (a fresh `python -m app` process per
case, default settings) answers them within its bounds (expand_max_calls, the same call once a round,
expand_max_request_chars, the window) for expand_max_rounds rounds, then asks once more without the tool, and the
stand-in answers in words. The same request with no flood is the baseline. Each case sends one request answered in
words first (the conversation's token counts cached, as in an agent loop), then --repeat flooded ones.

Printed per case: the bytes the stand-in received per round, the request's latency and the CPU the proxy and the
stand-in spent on it (median of --repeat), the slowest /healthz answer a poller got (every 20 ms, beside the
request) during it, the proxy's peak resident memory (with --workers, summed over its processes), and the proxy's
count of expand calls by result (/metrics, which adds up the workers).

The splitter: in this process, the CPU the expand loop's SSE splitter (app/upstream/sse.py) takes over one event
that never ends, fed 64 KB at a time until it passes the limit (max_body_bytes) and the splitter gives up; beside
it, the same chunks passed on as the plain relay does, with no search. The best of 3.

Bounded: a fixed count of requests, a timeout per request and --max-seconds for the flood; both servers are always
stopped. Loopback only.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from app.settings import Settings

from .. import CHECKOUT
from ..agent_history import agent_history
from ..processes import Server, answers, free_port, server_environment
from .flood import Case, Target, request_body, run_case
from .splitter import CHUNK_BYTES, time_splitter

MAX_BODY_BYTES: int = Settings.model_fields["max_body_bytes"].default
KINDS = {"same": False, "lines": True}  # how the calls of a flood differ: not at all, or by the line they ask for


def mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


def name(case: Case) -> str:
    if case.calls == 0:
        return "no flood (the model answers in words)"
    return f"flood of {case.calls:,} calls, " + ("each a line of its own" if case.lines else "all the same")


def describe(case: Case, baseline: Case | None) -> list[str]:
    if not case.sent:
        return [f"{name(case)}: not run (--max-seconds reached)"]
    first = case.sent[0]
    answer = f" (the model's answer: {first.answers[0]:,} bytes)" if case.calls else ""
    rounds = first.rounds
    per_round = " / ".join(f"{n:,}" for n in rounds)
    flooded = f" ({first.flooded} answered with the flood)" if case.calls else ""
    lines = [f"{name(case)}{answer}", f"  {len(rounds)} round(s) upstream{flooded}, bytes per round: {per_round}"]
    if any(s.rounds != rounds for s in case.sent):
        lines.append("  (the rounds differed between requests: " + "; ".join(str(s.rounds) for s in case.sent) + ")")
    total = f"  upstream bytes in all: {sum(rounds):,} per request"
    if baseline is not None and baseline.sent:
        total += f" ({sum(rounds) - sum(baseline.sent[0].rounds):+,} over no flood)"
    lines.append(total)
    lines.append(
        f"  request: median {case.median('seconds'):.2f} s, max {case.worst('seconds'):.2f} s;"
        f" CPU median: proxy {case.median('proxy_cpu'):.2f} s, stand-in model {case.median('upstream_cpu'):.2f} s"
    )
    lines.append(
        f"  /healthz slowest during a request: median {ms(case.median('healthz_longest'))},"
        f" worst {ms(case.worst('healthz_longest'))} ({sum(s.polls for s in case.sent)} polls,"
        f" {case.healthz_errors} failed)"
    )
    lines.append(
        f"  proxy peak RSS: {mib(case.rss_peak)} (when ready {mib(case.rss_start)}, after the warm-up"
        f" {mib(case.rss_warm)})"
    )
    outcomes = ", ".join(f"{result} {n:,}" for result, n in sorted(case.outcomes.items()) if n)
    lines.append(f"  expand calls by result, all requests: {outcomes or 'none'}")
    lines += [f"  ERROR: {problem}" for problem in case.problems]
    return lines


def flood(args: argparse.Namespace, cases: list[tuple[int, bool]]) -> tuple[list[Case], int]:
    deadline = time.monotonic() + args.max_seconds
    body = request_body(agent_history(args.messages, args.chars), args.stream)
    up_port = free_port()
    upstream = f"http://127.0.0.1:{up_port}"
    done: list[Case] = []
    with tempfile.TemporaryDirectory(prefix="hostile-") as scratch:
        # From the checkout, so both run this tree's code; with none of the caller's configuration.
        server = partial(Server, env=server_environment(), cwd=CHECKOUT, start_timeout=60.0)
        command = [sys.executable, "-m", "bench.hostile.upstream", str(up_port)]
        with server("stand-in model", command, Path(scratch, "upstream.log"), answers(f"{upstream}/stats")) as model:
            for index, (calls, lines) in enumerate(cases):
                # A fresh proxy per case: its peak memory is that case's.
                port = free_port()
                proxy = f"http://127.0.0.1:{port}"
                argv = [sys.executable, "-m", "app", "--host", "127.0.0.1", "--port", str(port)]
                argv += ["--upstream", f"{upstream}/v1", "--workers", str(args.workers), "--log-level", "warning"]
                log, ready = Path(scratch, f"proxy-{index}.log"), answers(f"{proxy}/healthz", timeout=2)
                with server("compaction-proxy", argv, log, ready) as running:
                    target = Target(proxy, upstream, running.pid, model.pid)
                    done.append(run_case(target, calls, lines, body, args.stream, args.repeat, deadline))
    return done, len(body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", default="2000,8000", help="the floods: calls per answer (%(default)s)")
    parser.add_argument("--kinds", default="same,lines", help="the floods' calls: same, lines or both (%(default)s)")
    parser.add_argument("--stream", action="store_true", help="stream: the client asks for it, the model answers SSE")
    parser.add_argument("--workers", type=int, default=1, help="the proxy's --workers (1)")
    parser.add_argument("--repeat", type=int, default=5, help="flooded requests per case, one proxy process (5)")
    parser.add_argument("--messages", type=int, default=300, help="messages of the agent history (300)")
    parser.add_argument("--chars", type=int, default=810_000, help="its characters: a 0.9 MB body (810000)")
    parser.add_argument("--split-limit", type=int, default=MAX_BODY_BYTES, help="the splitter's limit (max_body_bytes)")
    parser.add_argument("--max-seconds", type=float, default=600, help="send no request after this long (600)")
    parser.add_argument("--smoke", action="store_true", help="tiny: floods of 200 and 800 on a 0.25 MB request, once")
    args = parser.parse_args(argv)
    if args.smoke:
        args.calls, args.repeat, args.messages, args.chars, args.split_limit = "200,800", 1, 100, 220_000, 2**21
    kinds = [KINDS[kind] for kind in args.kinds.split(",")]
    cases = [(0, False)] + [(int(n), lines) for lines in kinds for n in args.calls.split(",")]

    done, size = flood(args, cases)
    processes = "1 process" if args.workers == 1 else f"{args.workers} workers"
    answers_as = "streamed (SSE)" if args.stream else "whole (JSON)"
    print(f"hostile: a {size / 1e6:.2f} MB agent-history request ({args.messages} messages), answers {answers_as},")
    print(f"         through compaction-proxy ({processes}), a fresh one per case; {args.repeat} request(s) a case")
    baseline = done[0] if done and done[0].calls == 0 else None
    for case in done:
        print("\n".join(describe(case, baseline if case is not baseline else None)))

    timing = time_splitter(args.split_limit, repeat=3)
    print(
        f"splitter: one event that never ends, {timing.fed / 1e6:.1f} MB in {timing.chunks} chunks of"
        f" {CHUNK_BYTES // 1024} KB until EventTooLarge (limit {args.split_limit:,} bytes)"
    )
    print(f"  CPU: EventSplitter {ms(timing.splitter_seconds)}, the plain relay's loop {ms(timing.relay_seconds)}")
    errors = sum(len(case.problems) + case.healthz_errors + case.unsent for case in done)
    print(f"errors: {errors}")
    return 0 if errors == 0 else 1
