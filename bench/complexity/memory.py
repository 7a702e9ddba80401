"""The process's memory after a burst of requests carrying regular expressions, read in a fresh interpreter so
that the benchmark's own caches do not count.

    python -m bench.complexity.memory     # one reading a line: what, a tab, megabytes
"""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import regex

from app.edge.errors import ApiError
from app.settings import Settings
from app.wire import ChatCompletions
from strategies import Encodings

from .. import CHECKOUT
from ..compactor import compactor
from ..processes import memory_bytes


def readings() -> list[tuple[str, float]]:
    """main() run in a fresh interpreter: (what, megabytes) per reading."""
    command = [sys.executable, "-m", "bench.complexity.memory"]
    out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=CHECKOUT).stdout
    return [(what, float(mb)) for what, _, mb in (line.rpartition("\t") for line in out.strip().splitlines())]


def _rss_mb() -> float:
    return memory_bytes(os.getpid(), "VmRSS") / 2**20


def main() -> None:
    """RSS at start, after 12 requests with the issue's nested repeats (refused now), after 200 allowed requests
    with distinct bounded patterns, and, for comparison, after compiling the issue's 12 patterns with the regex
    engine's own cache and no bounds, as before. One line per reading: what, a tab, megabytes.
    """
    # A request may set the patterns; no memo, so that what the readings show is what the patterns leave behind.
    settings = Settings(default_strategies="none", request_parameters=["trim_bulky.patterns"], strategy_memo_chars=0)
    c = compactor(settings, Encodings())
    c.counter.count_text("load the encoding first: it is most of a fresh process's memory", "gpt-4o")
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
        c.compact_sync(
            body, ChatCompletions(), c.chain_for(f'trim_bulky(patterns=["^(?:Quotes|Fares) {i}{{1,50}}[a-z]{{2,9}}"])')
        )
    print(f"then 200 requests with distinct bounded patterns\t{_rss_mb()}")
    for count in range(1000, 1012):
        regex.compile(f"(?:a{{{count}}}){{1000}}")
    print(f"then the 12 patterns compiled as before (engine cache, no bounds)\t{_rss_mb()}")


if __name__ == "__main__":
    main()
