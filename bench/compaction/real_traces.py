"""The real-trace table of docs/benchmarks.md, from one run per wire form over a real corpus:

    python -m bench.compaction --corpora swe --swe-data FILE --chains 'A;B' --summary chat.json
    python -m bench.compaction --wire messages --corpora swe --swe-data FILE --chains 'A;B' --summary messages.json
    python -m bench.compaction.real_traces chat.json messages.json --update-docs docs/benchmarks.md

Per form and chain relative to `none`: prompt tokens, input billed with and without the expand rounds at both
price models, rounds and needed stubs per 100 requests, and each session alone (report/real_traces.py); with
--update-docs, between the markers of the section on real sessions.
"""

from __future__ import annotations

from functools import partial

from . import summaries
from .report.real_traces import BEGIN, END, table


def main(argv: list[str] | None = None) -> None:
    parser = summaries.parser("python -m bench.compaction.real_traces", __doc__)
    parser.add_argument("--corpus", default="swe", help="the corpus key the runs replayed (default swe)")
    args = parser.parse_args(argv)
    summaries.run(parser, args, partial(table, corpus=args.corpus), (BEGIN, END))


if __name__ == "__main__":
    main()
