"""What a request can make the proxy do: the time of every strategy at growing request sizes, on the shapes an
attacker would pick, and the process's memory after a burst of requests carrying regular expressions.

    python -m bench.complexity                               # sizes 8k..64k messages, about 3 minutes
    python -m bench.complexity --sizes 1000,2000 --quick     # smoke size
    python -m bench.complexity --update-docs docs/complexity.md
    python -m bench.complexity --shape parallel --chain minify,mask,window --sizes 4000,8000   # some rows only
    python -m bench.complexity --shape parallel --function-calls   # work that no other load changes

Each cell is the proxy's whole CPU path for one request (parse, chain, count, serialise: Compactor.compact_sync)
with cold caches, since an attacker sends a fresh conversation every time: the best of --repeat runs, pinned
to one core. The growth column is the exponent k in time ~ size^k between the two largest sizes: 1 is linear,
2 quadratic (n log n reads as about 1.1). With --function-calls, a cell is the Python function calls of one request
(cProfile), which other work on the machine does not change: linear work doubles them exactly with the size.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from pathlib import Path

from ..docs_block import replace_block
from . import memory
from .grid import CASES, SHAPES, Case, growth, run_grid

BEGIN, END = "<!-- bench.complexity: begin -->", "<!-- bench.complexity: end -->"


def document(sizes: list[int], rows: list[tuple[Case, str, list[float]]], rss: list[tuple[str, float]]) -> str:
    header = " | ".join(f"{n:,} msgs" for n in sizes)
    lines = [
        "Time of the proxy's whole CPU path for one request (parse, chain, count tokens, serialise), cold caches, "
        "best of the runs, one core; growth = the exponent k in time ~ size^k between the two largest sizes "
        "(1: linear; 2: quadratic). Shapes: `chat` one-character user/assistant messages (60,000 of them are "
        "the issue's 2 MB attack), `tools` one-character tool results, `pinned` half system messages (over any "
        "total: every request end must cut), `escapes` tool results with nested escape codes, `parallel` one "
        "assistant message with n parallel calls, each with its result of about 200 characters (n + 2 messages).",
        "",
        f"| chain | shape | {header} | growth |",
        "|---|---|" + "---|" * len(sizes) + "---|",
    ]
    for case, shape, times in rows:
        extra = " (max_completion_tokens 127000: a limit of 0)" if case.body else ""
        cells = " | ".join(f"{t * 1000:,.0f} ms" for t in times)
        lines.append(f"| `{case.chain}`{extra} | {shape} | {cells} | {growth(sizes, times):.2f} |")
    lines += ["", "Memory (RSS of a fresh process), a burst of requests carrying regular expressions:", ""]
    lines += ["| after | RSS |", "|---|---|"] + [f"| {what} | {mb:,.0f} MB |" for what, mb in rss]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.complexity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="8000,16000,32000,64000", help="messages per request (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per cell, the best kept (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="the first chains only (smoke run)")
    parser.add_argument("--shape", action="append", choices=sorted(SHAPES), help="only this shape (repeatable)")
    parser.add_argument(
        "--chain", action="append", help="only the cases of this chain, as the grid spells it (repeatable)"
    )
    parser.add_argument(
        "--function-calls", action="store_true", help="each cell the Python function calls of one request, not its time"
    )
    parser.add_argument("--update-docs", metavar="FILE", help="rewrite the block between this benchmark's markers")
    args = parser.parse_args(argv)
    unknown = set(args.chain or ()) - {case.chain for case in CASES}
    if unknown:
        parser.error(f"no case of chain {sorted(unknown)} in the grid (bench/complexity/grid.py CASES)")
    partial = args.shape is not None or args.chain is not None or args.function_calls
    if partial and args.update_docs:
        parser.error("--update-docs rewrites the table of times: run it without --shape, --chain or --function-calls")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    sizes = [int(s) for s in args.sizes.split(",")]
    unit = "(function calls)" if args.function_calls else "(ms)"
    print(f"{'chain':60} {'shape':8} " + " ".join(f"{n:>11}" for n in sizes) + f"   {unit}")
    shapes, chains = set(args.shape or SHAPES), set(args.chain or ()) or None
    rows = run_grid(sizes, args.repeat, args.quick, shapes, chains, args.function_calls)
    if partial:
        if args.function_calls:
            for case, shape, cells in rows:
                print(f"growth {growth(sizes, cells):.2f}  {case.chain} on {shape}")
        return
    rss = memory.readings()
    for what, mb in rss:
        print(f"RSS {mb:8.0f} MB  {what}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"this process's peak RSS: {peak:.0f} MB")
    if args.update_docs:
        path = Path(args.update_docs)
        text = path.read_text() if path.exists() else f"# Work per request\n\n{BEGIN}\n{END}\n"
        updated = replace_block(text, BEGIN, END, document(sizes, rows, rss))
        if updated is None:
            sys.exit(f"{path}: no {BEGIN} ... {END} markers")
        path.write_text(updated)
