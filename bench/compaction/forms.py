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

from . import summaries
from .report.forms import BEGIN, END, side_by_side


def main(argv: list[str] | None = None) -> None:
    parser = summaries.parser("python -m bench.compaction.forms", __doc__)
    summaries.run(parser, parser.parse_args(argv), side_by_side, (BEGIN, END))


if __name__ == "__main__":
    main()
