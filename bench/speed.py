"""How long compaction takes on a big agent history, cold and with warm token-count caches.

    python -m bench.speed                       # 1,000 messages, about 2 MB, pinned to one core
    python -m bench.speed --messages 40 --repeat 3   # smoke size

Measures the proxy's whole per-request CPU path (parse the body, run the chain, count tokens before and
after, serialise) with the default chain of the default settings, plus raw token-counting throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from app.compaction.compactor import Compactor
from app.settings import Settings
from app.wire import ChatCompletions
from strategies import Encodings, Registry, TokenCounter

from .agent_history import agent_history
from .compactor import compactor


def measure(args: argparse.Namespace) -> None:
    settings = Settings(**({"default_strategies": args.chain} if args.chain else {}))
    registry = Registry.with_plugins()
    encodings = Encodings()
    encodings.get("o200k_base")  # loading the rank file is start-up cost, not per-request cost
    history = agent_history(args.messages, args.chars)
    body = json.dumps({"model": "gpt-4o", "messages": history}).encode()
    grown = json.dumps({"model": "gpt-4o", "messages": [*history, {"role": "user", "content": "And now?"}]}).encode()
    print(f"history: {len(history)} messages, {len(body) / 1e6:.2f} MB, chain: {settings.default_strategies}")

    def timed(c: Compactor, raw: bytes) -> float:
        started = time.perf_counter()
        c.compact_sync(raw, ChatCompletions(), c.default_chain)
        return (time.perf_counter() - started) * 1000

    cold = [timed(compactor(settings, encodings, registry), body) for _ in range(args.repeat_cold)]
    warm_compactor = compactor(settings, encodings, registry)
    timed(warm_compactor, body)
    warm = [timed(warm_compactor, body) for _ in range(args.repeat)]
    grown_ms = [timed(warm_compactor, grown) for _ in range(args.repeat)]
    result = warm_compactor.compact_sync(body, ChatCompletions(), warm_compactor.default_chain).result
    print(f"tokens before -> after: {result.tokens_before} -> {result.tokens_after}")
    print(f"cold caches:              median {statistics.median(cold):8.1f} ms  (n={len(cold)})")
    print(f"warm caches, same request: median {statistics.median(warm):7.1f} ms  max {max(warm):.1f} ms")
    print(f"warm caches, one new msg:  median {statistics.median(grown_ms):7.1f} ms  max {max(grown_ms):.1f} ms")

    counter = TokenCounter(encodings)
    started = time.perf_counter()
    tokens = counter.count_messages(history, "gpt-4o")
    seconds = time.perf_counter() - started
    print(f"counting throughput (cold): {tokens / seconds / 1e6:.2f} M tokens/s, {len(body) / seconds / 1e6:.1f} MB/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--chars", type=int, default=2_000_000, help="total characters of tool output")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--repeat-cold", type=int, default=5)
    parser.add_argument("--chain", help="chain to measure (default: the default settings' default chain)")
    parser.add_argument("--all-cores", action="store_true", help="do not pin the process to one core")
    args = parser.parse_args()
    if not args.all_cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    measure(args)


if __name__ == "__main__":
    main()
