"""What the proxy costs on the wire: added latency, throughput, a stream's first byte and memory.

    python -m bench.overhead                          # full run, about 6 minutes on 2 cores
    python -m bench.overhead --smoke                  # seconds, for CI: this proxy and nginx only
    python -m bench.overhead --update-docs docs/benchmarks.md   # full run, tables and charts into the docs

The proxy runs on loopback in front of nginx answering canned completions (bench/overhead/nginx.py), an
upstream far faster than any proxy here, so what is measured is the proxy. The same load runs against
nginx directly and through each target: this proxy with `X-Compaction-Strategies: none` and with its
default chain, and, when installed in their own virtualenvs, LiteLLM's and Headroom's proxies in
pass-through mode (bench/overhead/proxies.py). Needs nginx and hey (Debian: apt-get install nginx hey).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .goals import goals_markdown
from .measure import measure
from .report import Report, check_docs, markdown, update_docs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.overhead", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="a few seconds per target, no peers (for CI)")
    parser.add_argument("--duration", type=int, help="whole seconds per load run (default 5; smoke 1)")
    parser.add_argument("--warmup", type=int, help="unmeasured seconds of load per body first (default 1)")
    parser.add_argument("--concurrency", default="1,16,64", help="comma-separated (default 1,16,64)")
    parser.add_argument("--first-byte-samples", type=int, help="streamed requests per body (default 30; smoke 3)")
    parser.add_argument("--no-peers", action="store_true", help="only nginx and this proxy")
    parser.add_argument("--litellm", metavar="EXE", help="the litellm command (default .venv-bench-litellm/bin)")
    parser.add_argument("--headroom", metavar="EXE", help="the headroom command (default .venv-bench-headroom/bin)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--charts", type=Path, metavar="DIR", help="draw PNG charts there (needs matplotlib)")
    parser.add_argument("--from-json", type=Path, metavar="FILE", help="no run: report a saved --json file again")
    parser.add_argument(
        "--update-docs",
        type=Path,
        metavar="FILE",
        help="rewrite the generated block of FILE's Overhead section, charts next to FILE",
    )
    args = parser.parse_args(argv)
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    if args.duration is None:
        args.duration = 1 if args.smoke else 5
    if args.warmup is None:
        args.warmup = 1
    if args.first_byte_samples is None:
        args.first_byte_samples = 3 if args.smoke else 30
    args.no_peers = args.no_peers or args.smoke
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.update_docs:
        try:
            check_docs(args.update_docs)
        except (OSError, ValueError) as exc:
            sys.exit(f"bench.overhead: {exc}")
    if args.from_json:
        report = Report.from_json(json.loads(args.from_json.read_text()))
    else:
        report = measure(args)
    text = markdown(report) + goals_markdown(report)
    print(text, end="")
    if args.json:
        args.json.write_text(json.dumps(report.to_json(), indent=1) + "\n")
    charts = args.charts or (args.update_docs.parent if args.update_docs else None)
    drawn = []
    if charts:
        from .charts import draw  # matplotlib is needed only here

        drawn = draw(report, charts)
        for path in drawn:
            print(f"chart: {path}")
    if args.update_docs:
        images = "".join(f"![{p.stem}]({os.path.relpath(p, args.update_docs.parent)})\n\n" for p in drawn)
        update_docs(args.update_docs, f"\n{text}\n{images}")
        print(f"updated: {args.update_docs}")
