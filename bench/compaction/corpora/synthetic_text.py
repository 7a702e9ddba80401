"""Filler text for the synthetic sessions: source files, test logs, JSON, diffs, search hits, prose, option lists.

Shaped like what agents really read (ANSI-coloured logs with repeated warnings, pretty-printed JSON, files
read again unchanged) so that every strategy has something to act on. Never contains a planted value's shape:
no currency amounts, no CODE-1234-XY codes, no names, only quarter-hour times.
"""

from __future__ import annotations

import json
import random
from typing import Any

WORDS = (
    "account adapter amount balance batch buffer cache charge client config currency customer decimal "
    "endpoint event gateway handler invoice ledger limit merchant order payload payment payout queue "
    "reconcile record refund request retry schedule service session settle status token total webhook"
).split()
PROSE = (
    "arrive beach breakfast bridge castle coast day evening ferry garden harbour hike hotel island lake "
    "lunch market morning museum night old quiet river road square station street terrace town train "
    "valley view village walk"
).split()
RED, GREEN, YELLOW, RESET = "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[0m"


def ident(rng: random.Random) -> str:
    return "_".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))


def quarter_time(rng: random.Random) -> str:
    return f"{rng.randrange(6, 23):02d}:{rng.choice((0, 15, 30, 45)):02d}"


def source_file(path: str, size: int) -> str:
    """A Python module; the same path always gives the same text, so a re-read is an exact repeat."""
    rng = random.Random(path)
    lines = [f'"""{path}: {" ".join(rng.choice(WORDS) for _ in range(8))}."""', "", "from decimal import Decimal", ""]
    while sum(len(line) + 1 for line in lines) < size:
        name = ident(rng)
        lines.append(f"def {name}({ident(rng)}, {ident(rng)}=None):")
        lines.append(f'    """{" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))).capitalize()}."""')
        for _ in range(rng.randint(2, 8)):
            lines.append(f"    {ident(rng)} = {ident(rng)}.{ident(rng)}({rng.randrange(1000)})")
        lines.append(f"    return Decimal({rng.randrange(10**6)}) / 100")
        lines.append("")
    return "\n".join(f"{n + 1:4d}  {line}" for n, line in enumerate(lines))


def test_log(rng: random.Random, tests: int, failing: list[str], extra: str = "") -> str:
    """pytest output with colours, a warning repeated many times, and tracebacks for the failures."""
    lines = [f"{GREEN}============================= test session starts =============================={RESET}"]
    module = ident(rng)
    for n in range(tests):
        status = f"{GREEN}PASSED{RESET}"
        lines.append(f"tests/test_{module}.py::test_{ident(rng)}_{n} {status} [{100 * (n + 1) // max(1, tests):3d}%]")
    warning = f"{YELLOW}DeprecationWarning: {ident(rng)} is deprecated; use {ident(rng)} instead{RESET}"
    lines.extend([warning] * rng.randint(5, 40))
    for name in failing:
        lines.append(f"{RED}FAILED{RESET} {name}")
        lines.append(f"    assert {ident(rng)}.{ident(rng)} == {rng.randrange(10**5)}")
        lines.append(f"E   AssertionError: got {rng.randrange(10**5)} ({ident(rng)})")
    if extra:
        lines.append(extra)
    lines.append(
        f"{RED if failing else GREEN}=== {len(failing)} failed, {tests - len(failing)} passed in 3.21s ==={RESET}"
    )
    return "\n".join(lines)


def json_document(rng: random.Random, items: int, extra: dict[str, Any] | None = None) -> str:
    """An API response as a client library prints it: indented, so minify has whitespace to remove."""
    records = [
        {
            "id": f"{rng.choice(WORDS)}_{rng.randrange(10**6):06d}",
            "status": rng.choice(("pending", "settled", "failed", "refunded")),
            "amount_cents": rng.randrange(100, 10**6),
            "updated": f"2026-11-{rng.randrange(1, 29):02d}T{quarter_time(rng)}:00Z",
            "tags": [rng.choice(WORDS) for _ in range(rng.randint(0, 3))],
        }
        for _ in range(items)
    ]
    document: dict[str, Any] = {"object": "list", "has_more": rng.random() < 0.5, "data": records}
    if extra:
        document.update(extra)
    return json.dumps(document, indent=2)


def grep_output(rng: random.Random, paths: list[str], hits: int) -> str:
    return "\n".join(
        f"{rng.choice(paths)}:{rng.randrange(1, 400)}:    {ident(rng)} = {ident(rng)}({ident(rng)})"
        for _ in range(hits)
    )


def git_diff(rng: random.Random, path: str, hunks: int) -> str:
    lines = [f"diff --git a/{path} b/{path}", f"--- a/{path}", f"+++ b/{path}"]
    for _ in range(hunks):
        start = rng.randrange(1, 300)
        lines.append(f"@@ -{start},7 +{start},8 @@ def {ident(rng)}(")
        for _ in range(rng.randint(4, 10)):
            sign = rng.choice(" +-  ")
            lines.append(f"{sign}    {ident(rng)} = {ident(rng)}({rng.randrange(1000)})")
    return "\n".join(lines)


def remark(rng: random.Random) -> str:
    """What a coding agent says between calls."""
    verb = rng.choice(("Checking", "Looking at", "Next:", "Reading", "Fixing", "Testing"))
    return f"{verb} the {rng.choice(WORDS)} {rng.choice(WORDS)} in {ident(rng)}."


def sentence(rng: random.Random) -> str:
    words = [rng.choice(PROSE) for _ in range(rng.randint(7, 16))]
    return " ".join(words).capitalize() + "."


def prose(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    while sum(len(s) + 1 for s in out) < chars:
        out.append(sentence(rng))
    return " ".join(out)


def option_list(rng: random.Random, header: str, items: list[str]) -> str:
    """A bulky reply in the shape trim_bulky's default patterns look for: a header line, then one line per option."""
    return "\n".join([header, *(f"{n}. {item}" for n, item in enumerate(items, start=1))])


def option_item(rng: random.Random, planted: str | None = None) -> str:
    label = planted or f"{rng.choice(PROSE).capitalize()} {rng.choice(PROSE)} {rng.randrange(100, 999)}"
    return f"{label}, {quarter_time(rng)} - {quarter_time(rng)}, {rng.randrange(20, 400)} EUR; {sentence(rng)}"
