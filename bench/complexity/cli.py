"""What a request can make the proxy do: the time of every strategy at growing request sizes, on the shapes an
attacker would pick, and the process's memory after a burst of requests carrying regular expressions.

    python -m bench.complexity                               # sizes 8k..64k messages, about 3 minutes
    python -m bench.complexity --sizes 1000,2000 --quick     # smoke size
    python -m bench.complexity --update-docs docs/complexity.md

Each cell is the proxy's whole CPU path for one request (parse, chain, count, serialise: Compactor.compact_sync)
with cold caches, since an attacker sends a fresh conversation every time: the best of --repeat runs, pinned
to one core. The growth column is the exponent k in time ~ size^k between the two largest sizes: 1 is linear,
2 quadratic (n log n reads as about 1.1).
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import regex

from app.compaction import Compactor
from app.errors import ApiError
from app.lanes import Lanes
from app.notes import NotesTools
from app.request_policy import RequestPolicy
from app.settings import Settings
from strategies import Chain, Encodings, Memo, ModelTable, Registry, TokenCounter
from strategies.notes_io import SUMMARISER_LIMIT, NotesUnavailable

from .. import CHECKOUT
from ..docs_block import replace_block
from ..notes.stand_in import DictNotes, StandInSummariser

Message = dict[str, Any]
BEGIN, END = "<!-- bench.complexity: begin -->", "<!-- bench.complexity: end -->"


def chat(n: int) -> list[Message]:
    """n one-character messages, user and assistant in turn: the issue's 2 MB attack at 60,000."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": "a"} for i in range(n)] + [
        {"role": "user", "content": "a"}
    ]


def tools(n: int) -> list[Message]:
    """One task, then n/2 tool calls with one-character results."""
    messages: list[Message] = [{"role": "user", "content": "task"}]
    for i in range(n // 2):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "a"},
        ]
    return messages


def pinned(n: int) -> list[Message]:
    """Half system messages: the pinned part alone is over any total, so every request end must cut."""
    return [{"role": "system" if i % 2 == 0 else "user", "content": "a"} for i in range(n)]


def escapes(n: int) -> list[Message]:
    """Tool results whose escape codes nest, so that each pass of a naive clean-up uncovers one more."""
    out = tools(n)
    for message in out:
        if message["role"] == "tool":
            message["content"] = "\x1b" * 20 + "[m" * 20
    return out


SHAPES: dict[str, Callable[[int], list[Message]]] = {"chat": chat, "tools": tools, "pinned": pinned, "escapes": escapes}


@dataclass(frozen=True)
class Case:
    chain: str
    shapes: tuple[str, ...]
    body: dict[str, Any] | None = None  # extra request fields
    notes: bool = False


CASES = [
    Case("none", ("chat", "tools")),
    Case("minify,dedupe,window", ("chat", "tools", "escapes")),
    Case("minify", ("tools", "escapes")),
    Case("dedupe", ("tools",)),
    Case("window", ("chat", "pinned")),
    Case("window(epoch=1,min_gain=0.01)", ("chat",)),
    Case("fit(total=1200)", ("chat", "tools", "pinned")),
    Case("middle_out(budget=1200)", ("chat", "tools", "pinned")),
    Case("middle_out(max_messages=10)", ("chat",)),
    Case("shorten_tools", ("chat", "tools")),
    Case("shorten_tools", ("chat",), body={"max_completion_tokens": 127_000}),  # a limit of 0 tokens
    Case("shorten_tools(epoch=1,min_gain=1)", ("tools",)),
    Case("prune_tool_outputs(max_chars=0,epoch=1,min_gain=1)", ("tools",)),
    Case("clear_tool_uses(trigger=0,keep=1)", ("tools",)),
    Case("clear_tool_uses(trigger=0,epoch=1,min_gain=1)", ("tools",)),
    Case("trim_bulky", ("chat",)),
    Case("notes(budget=200,prepare_at=1)", ("chat",), notes=True),
]


class CappedSummariser(StandInSummariser):
    """bench.notes' stand-in summariser with the proxy's per-request call limit."""

    def __init__(self, calls: int) -> None:
        super().__init__(first_line_only=True, max_words=180, nothing="")
        self.calls_left = calls

    def summarise(self, messages: list[Message], model: str) -> str:
        if self.calls_left <= 0:
            raise NotesUnavailable(SUMMARISER_LIMIT)
        self.calls_left -= 1
        return super().summarise(messages, model)


def compactor(settings: Settings, encodings: Encodings) -> Compactor:
    registry = Registry.with_plugins()
    return Compactor(
        registry,
        TokenCounter(encodings, cache_size=settings.token_cache_size),
        ModelTable.packaged(),
        "none",
        {},
        lanes=Lanes(settings),
        policy=RequestPolicy(registry),
        memo=Memo(settings.strategy_memo_chars),
    )


def time_once(case: Case, shape: str, size: int, settings: Settings, encodings: Encodings) -> float:
    body = orjson.dumps({"model": "gpt-4o", "messages": SHAPES[shape](size), **(case.body or {})})
    # Cold: a fresh token cache and memo, as for an attacker's fresh conversation (the tokenizer stays loaded).
    c = compactor(settings, encodings)
    chain: Chain = c.chain_for(case.chain)
    notes = NotesTools(CappedSummariser(settings.summariser_max_calls), DictNotes()) if case.notes else None
    started = time.perf_counter()
    c.compact_sync(body, chain, trace=True, notes=notes)
    return time.perf_counter() - started


def run_grid(sizes: list[int], repeat: int, quick: bool) -> list[tuple[Case, str, list[float]]]:
    settings = Settings()
    encodings = Encodings()
    TokenCounter(encodings).count_text("load the encoding", "gpt-4o")
    rows = []
    cases = CASES[:4] if quick else CASES
    for case in cases:
        for shape in case.shapes:
            times = [min(time_once(case, shape, n, settings, encodings) for _ in range(repeat)) for n in sizes]
            rows.append((case, shape, times))
            print(f"{case.chain:52} {shape:8} " + " ".join(f"{t * 1000:9.1f}" for t in times), flush=True)
    return rows


def growth(sizes: list[int], times: list[float]) -> float:
    return math.log(times[-1] / times[-2]) / math.log(sizes[-1] / sizes[-2])


def memory_after_patterns() -> list[tuple[str, float]]:
    """The memory probe (probe_memory) run in a fresh interpreter, so this process's own caches do not count."""
    command = [sys.executable, "-m", "bench.complexity", "--memory-probe"]
    out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=CHECKOUT).stdout
    return [(what, float(mb)) for what, _, mb in (line.rpartition("\t") for line in out.strip().splitlines())]


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def probe_memory() -> None:
    """RSS at start, after 12 requests with the issue's nested repeats (refused now), after 200 allowed requests
    with distinct bounded patterns, and, for comparison, after compiling the issue's 12 patterns with the regex
    engine's own cache and no bounds, as before. One line per reading: what, a tab, megabytes.
    """
    registry = Registry.with_plugins()
    counter = TokenCounter(Encodings())
    policy = RequestPolicy(registry, ["trim_bulky.patterns"])
    c = Compactor(registry, counter, ModelTable.packaged(), "none", {}, lanes=Lanes(Settings()), policy=policy)
    counter.count_text("load the encoding first: it is most of a fresh process's memory", "gpt-4o")
    print(f"start (tokenizer loaded)\t{_rss_mb()}")
    for count in range(1000, 1012):
        try:
            c.chain_for(f'trim_bulky(patterns=["(?:a{{{count}}}){{1000}}"])')
        except ApiError:
            pass
    print(f"12 requests with (?:a{{1000..1011}}){{1000}} (refused)\t{_rss_mb()}")
    body = orjson.dumps(
        {"model": "gpt-4o", "messages": [{"role": "user", "content": "q"}, {"role": "user", "content": "next"}]}
    )
    for i in range(200):
        c.compact_sync(body, c.chain_for(f'trim_bulky(patterns=["^(?:Quotes|Fares) {i}{{1,50}}[a-z]{{2,9}}"])'))
    print(f"then 200 requests with distinct bounded patterns\t{_rss_mb()}")
    for count in range(1000, 1012):
        regex.compile(f"(?:a{{{count}}}){{1000}}")
    print(f"then the 12 patterns compiled as before (engine cache, no bounds)\t{_rss_mb()}")


def document(sizes: list[int], rows: list[tuple[Case, str, list[float]]], memory: list[tuple[str, float]]) -> str:
    header = " | ".join(f"{n:,} msgs" for n in sizes)
    lines = [
        "Time of the proxy's whole CPU path for one request (parse, chain, count tokens, serialise), cold caches, "
        "best of the runs, one core; growth = the exponent k in time ~ size^k between the two largest sizes "
        "(1: linear; 2: quadratic). Shapes: `chat` one-character user/assistant messages (60,000 of them are "
        "the issue's 2 MB attack), `tools` one-character tool results, `pinned` half system messages (over any "
        "total: every request end must cut), `escapes` tool results with nested escape codes.",
        "",
        f"| chain | shape | {header} | growth |",
        "|---|---|" + "---|" * len(sizes) + "---|",
    ]
    for case, shape, times in rows:
        extra = " (max_completion_tokens 127000: a limit of 0)" if case.body else ""
        cells = " | ".join(f"{t * 1000:,.0f} ms" for t in times)
        lines.append(f"| `{case.chain}`{extra} | {shape} | {cells} | {growth(sizes, times):.2f} |")
    lines += ["", "Memory (RSS of a fresh process), a burst of requests carrying regular expressions:", ""]
    lines += ["| after | RSS |", "|---|---|"] + [f"| {what} | {mb:,.0f} MB |" for what, mb in memory]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.complexity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="8000,16000,32000,64000", help="messages per request (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per cell, the best kept (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="the first chains only (smoke run)")
    parser.add_argument("--update-docs", metavar="FILE", help="rewrite the block between this benchmark's markers")
    parser.add_argument("--memory-probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_probe:
        probe_memory()
        return
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'chain':52} {'shape':8} " + " ".join(f"{n:>9}" for n in sizes) + "   (ms)")
    rows = run_grid(sizes, args.repeat, args.quick)
    memory = memory_after_patterns()
    for what, mb in memory:
        print(f"RSS {mb:8.0f} MB  {what}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"this process's peak RSS: {peak:.0f} MB")
    if args.update_docs:
        path = Path(args.update_docs)
        text = path.read_text() if path.exists() else f"# Work per request\n\n{BEGIN}\n{END}\n"
        updated = replace_block(text, BEGIN, END, document(sizes, rows, memory))
        if updated is None:
            sys.exit(f"{path}: no {BEGIN} ... {END} markers")
        path.write_text(updated)


if __name__ == "__main__":
    main()
