"""One overhead run: the request bodies written, every target started in turn against nginx, loaded, timed and
measured; a target that fails is a footnote when it is a peer and a failure of the run when it is not.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..agent_history import agent_history
from ..canned import MODEL
from ..processes import machine_busy_seconds, memory_bytes, own_cpu_seconds, wait_idle
from .load import debian_version, first_byte, hey
from .nginx import NginxUpstream
from .proxies import Endpoint, Target, Unavailable, compaction_proxy, direct, find_peer, headroom, litellm
from .report import (
    FirstByteRow,
    LoadRow,
    MemoryRow,
    Report,
    describe_machine,
    with_added_first_byte,
    with_added_latency,
)

# label -> (messages, characters of tool output) of the coding agent's request (bench/agent_history.py).
BODIES = {"2 KB": (6, 1_300), "200 KB": (100, 175_000), "2 MB": (1000, 1_800_000)}


@dataclass(frozen=True)
class Body:
    label: str
    messages: int
    path: Path  # "stream": false, for the load runs
    stream_path: Path  # "stream": true, for the first-byte runs
    size: int


def write_bodies(directory: Path) -> list[Body]:
    bodies = []
    for label, (messages, chars) in BODIES.items():
        history = agent_history(messages, chars)
        slug = label.replace(" ", "")
        paths = {}
        for stream in (False, True):
            path = directory / f"{slug}{'-stream' if stream else ''}.json"
            path.write_text(json.dumps({"model": MODEL, "messages": history, "stream": stream}))
            paths[stream] = path
        bodies.append(Body(label, len(history), paths[False], paths[True], paths[False].stat().st_size))
    return bodies


def targets(args: argparse.Namespace, not_run: dict[str, str]) -> list[Target]:
    chosen = [direct(), compaction_proxy("none"), compaction_proxy(None)]
    if not args.smoke:
        chosen.append(compaction_proxy(None, workers=2))
    peers: list[tuple[str, Callable[[], Target]]] = [
        ("LiteLLM proxy", lambda: litellm(find_peer(args.litellm, ".venv-bench-litellm", "litellm"))),
        ("Headroom proxy", lambda: headroom(find_peer(args.headroom, ".venv-bench-headroom", "headroom"))),
    ]
    for name, make in peers:
        if args.no_peers:
            not_run[name] = "skipped (--smoke or --no-peers)"
            continue
        try:
            chosen.append(make())
        except Unavailable as exc:
            not_run[name] = str(exc)
    return chosen


def settle(endpoint: Endpoint) -> None:
    if endpoint.pid is not None:
        wait_idle(endpoint.pid)


def measure_load(
    target: Target, upstream: str, bodies: list[Body], args: argparse.Namespace, scratch: Path
) -> tuple[list[LoadRow], MemoryRow | None]:
    rows = []
    with target.running(upstream, scratch, stream=False) as endpoint:
        idle = memory_bytes(endpoint.pid, "VmRSS") if endpoint.pid else 0
        url = f"{endpoint.base_url}/chat/completions"
        headers = {"Content-Type": "application/json", **endpoint.headers}
        for body in bodies:
            # Unmeasured: fills connection pools and per-message token caches, as a running proxy has them.
            hey(url, body.path, headers, concurrency=4, seconds=args.warmup)
            for concurrency in args.concurrency:
                settle(endpoint)
                r = hey(url, body.path, headers, concurrency=concurrency, seconds=args.duration)
                row = LoadRow(target.name, body.label, concurrency, r.requests, r.errors, r.rps, r.p50_ms, r.p99_ms)
                rows.append(row)
                progress(f"{target.name:28} {body.label:>6} c={concurrency:<3} p50 {row.p50_ms:8.2f} ms  "
                         f"p99 {row.p99_ms:8.2f} ms  {row.rps:8.0f} req/s  errors {row.errors}")  # fmt: skip
        memory = None
        if endpoint.pid is not None:
            memory = MemoryRow(target.name, idle / 2**20, memory_bytes(endpoint.pid) / 2**20)
    return rows, memory


def measure_first_byte(
    target: Target, upstream: str, bodies: list[Body], args: argparse.Namespace, scratch: Path
) -> list[FirstByteRow]:
    rows = []
    with target.running(upstream, scratch, stream=True) as endpoint:
        url = f"{endpoint.base_url}/chat/completions"
        headers = {"Content-Type": "application/json", **endpoint.headers}
        for body in bodies:
            settle(endpoint)
            r = first_byte(url, body.stream_path, headers, samples=args.first_byte_samples)
            rows.append(FirstByteRow(target.name, body.label, r.samples, r.errors, r.p50_ms, r.p90_ms))
            progress(f"{target.name:28} {body.label:>6} first byte p50 {r.p50_ms:8.2f} ms  errors {r.errors}")
    return rows


def settings(args: argparse.Namespace) -> dict[str, str]:
    levels = ", ".join(map(str, args.concurrency))
    return {
        "load": f"hey on 1 core, closed loop on keep-alive connections; {args.duration} s per run plus the requests "
        f"still in flight, after {args.warmup} s unmeasured per body; concurrency {levels}",
        "first event": f"{args.first_byte_samples} streamed requests per body, one at a time, a new connection each",
        "upstream": "nginx, 1 worker, canned JSON and SSE answers",
    }


def run(args: argparse.Namespace) -> Report:
    tools = {"hey": f"hey {debian_version('hey')}"}
    not_run: dict[str, str] = {}
    chosen = targets(args, not_run)
    with NginxUpstream() as nginx, tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        tools = {"nginx": nginx.version(), **tools, **{t.name: t.version for t in chosen if t.version}}
        scratch = Path(tmp)
        bodies = write_bodies(scratch)
        report = Report(
            command=" ".join(["python -m bench.overhead", *map(shlex.quote, sys.argv[1:])]),
            machine=describe_machine(tools),
            settings=settings(args),
            bodies=[{"label": b.label, "bytes": b.size, "messages": b.messages} for b in bodies],
        )
        for index, target in enumerate(chosen):
            json_dir, sse_dir = scratch / f"{index}-json", scratch / f"{index}-sse"
            json_dir.mkdir()
            sse_dir.mkdir()
            try:
                rows, memory = measure_load(target, nginx.json_base, bodies, args, json_dir)
                first = measure_first_byte(target, nginx.sse_base, bodies, args, sse_dir)
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                if not target.peer:
                    raise  # nginx or this proxy failing is a failure of the benchmark, not a footnote
                progress(f"{target.name}: failed: {exc}")  # the whole message, with the server's last lines
                not_run[target.name] = "failed: " + str(exc).splitlines()[0]
                continue
            report.load += rows
            report.first_byte += first
            report.memory += [memory] if memory else []
    report.load = with_added_latency(report.load)
    report.first_byte = with_added_first_byte(report.first_byte)
    report.not_run = not_run
    return report


def measure(args: argparse.Namespace) -> Report:
    """`run`, plus how busy the rest of the machine was meanwhile: everything here shares 2 cores."""
    started, busy, own = time.monotonic(), machine_busy_seconds(), own_cpu_seconds()
    try:
        report = run(args)
    except FileNotFoundError as exc:
        sys.exit(f"bench.overhead: {exc}")
    elapsed = time.monotonic() - started
    other = max(0.0, (machine_busy_seconds() - busy) - (own_cpu_seconds() - own))
    report.settings["other processes"] = (
        f"{other:.0f} CPU-seconds during the {elapsed:.0f} s run ({other / elapsed:.2f} cores on average)"
    )
    progress(f"finished in {elapsed:.0f} s")
    return report


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
