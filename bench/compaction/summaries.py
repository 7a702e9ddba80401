"""The command line of the tools that build a table from --summary files (bench.compaction.forms, .real_traces):
the files as arguments, the table printed, and with --update-docs written between the page's markers.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..docs_block import replace_block


def parser(prog: str, description: str | None) -> argparse.ArgumentParser:
    parsed = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parsed.add_argument("summaries", nargs="+", type=Path, help="--summary files of bench.compaction runs, in order")
    parsed.add_argument("--update-docs", type=Path, help="rewrite the block between this file's markers")
    return parsed


def run(
    parsed: argparse.ArgumentParser,
    args: argparse.Namespace,
    render: Callable[[list[dict[str, Any]]], str],
    markers: tuple[str, str],
) -> None:
    """The table `render` makes of the summaries, printed and, with --update-docs, written between `markers`; a file
    that cannot be read or a summary the table cannot use is a usage error (exit 2), the page left as it was.
    """
    try:
        block = render([json.loads(path.read_text()) for path in args.summaries])
    except (OSError, ValueError, KeyError) as exc:
        parsed.error(f"{type(exc).__name__}: {exc}")
    print(block)
    if args.update_docs:
        begin, end = markers
        replaced = replace_block(args.update_docs.read_text(), begin, end, block)
        if replaced is None:
            parsed.error(f"--update-docs: {args.update_docs} has no {end} marker pair")
        args.update_docs.write_text(replaced)
