"""The compaction benchmark's wire forms side by side, from the summaries of one run per form:

    python -m bench.compaction --update-docs docs/benchmarks.md --update-readme README.md --summary chat.json
    python -m bench.compaction --wire responses --summary responses.json
    python -m bench.compaction --wire messages --summary messages.json
    python -m bench.compaction.forms chat.json responses.json messages.json --update-docs docs/benchmarks.md

Per corpus, the shipped default relative to `none` in each form: prompt tokens, expand rounds per request, capped
rounds, fallbacks, and what was billed (report/forms.py); with --update-docs, between the markers of the section
"The three wire forms".
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..docs_block import replace_block
from .report.forms import BEGIN, END, side_by_side


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.compaction.forms",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("summaries", nargs="+", type=Path, help="--summary files of bench.compaction runs, in order")
    parser.add_argument("--update-docs", type=Path, help="rewrite the block between this file's forms markers")
    args = parser.parse_args(argv)
    try:
        block = side_by_side([json.loads(path.read_text()) for path in args.summaries])
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    print(block)
    if args.update_docs:
        text = args.update_docs.read_text()
        replaced = replace_block(text, BEGIN, END, block)
        if replaced is None:
            parser.error(f"--update-docs: {args.update_docs} has no {END} marker pair")
        args.update_docs.write_text(replaced)


if __name__ == "__main__":
    main()
