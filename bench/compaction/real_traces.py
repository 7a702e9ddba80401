"""The real-trace table of docs/benchmarks.md, from one run per wire form over a real corpus:

    python -m bench.compaction --corpora swe --swe-data FILE --chains 'A;B' --summary chat.json
    python -m bench.compaction --wire messages --corpora swe --swe-data FILE --chains 'A;B' --summary messages.json
    python -m bench.compaction.real_traces chat.json messages.json --update-docs docs/benchmarks.md

Per form and chain relative to `none`: prompt tokens, input billed with and without the expand rounds at both
price models, rounds and needed stubs per 100 requests, and each session alone (report/real_traces.py); with
--update-docs, between the markers of the section on real sessions.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..docs_block import replace_block
from .report.real_traces import BEGIN, END, table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.compaction.real_traces",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("summaries", nargs="+", type=Path, help="--summary files of bench.compaction runs, in order")
    parser.add_argument("--corpus", default="swe", help="the corpus key the runs replayed (default swe)")
    parser.add_argument("--update-docs", type=Path, help="rewrite the block between this file's markers")
    args = parser.parse_args(argv)
    try:
        block = table([json.loads(path.read_text()) for path in args.summaries], args.corpus)
    except (OSError, ValueError, KeyError) as exc:
        parser.error(f"{type(exc).__name__}: {exc}")
    print(block)
    if args.update_docs:
        replaced = replace_block(args.update_docs.read_text(), BEGIN, END, block)
        if replaced is None:
            parser.error(f"{args.update_docs}: no {BEGIN!r} ... {END!r} markers")
        args.update_docs.write_text(replaced)


if __name__ == "__main__":
    main()
