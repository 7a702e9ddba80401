"""Generated blocks inside docs/benchmarks.md: each benchmark rewrites only the text between its own markers."""

from __future__ import annotations


def replace_block(text: str, begin: str, end: str, block: str) -> str | None:
    """`text` with what lies between the markers replaced by `block`; None when the markers are absent."""
    if begin not in text or end not in text:
        return None
    head, rest = text.split(begin, 1)
    return f"{head}{begin}\n{block}{end}{rest.split(end, 1)[1]}"
