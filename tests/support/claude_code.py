"""Claude Code, run for real against the proxy and a scripted stand-in Messages upstream, all inside one private
network namespace: `unshare -n python -m tests.support.claude_code CLAUDE ROUNDS` brings up its loopback, starts the
stand-in and the proxy on it, runs `claude -p` in an empty home and project, and prints a JSON report.

The stand-in plays the model as the API would: every answer opens with a signed thinking block, and it refuses (400,
as the API does) a request whose thinking blocks are not the ones it signed, whose tool results answer no tool use
of the turn before, whose tool uses have no result, or that carries more than 4 cache_control breakpoints. For
ROUNDS turns it asks for a Bash call whose output is several thousand tokens, so the history grows past the window
the proxy is given for the model; then it answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from app import Settings, create_app
from app.wire.cache_control import MAX_BREAKPOINTS, marker
from tests.support.messages_upstream import message_events, signature
from tests.support.servers import LoopbackServer

MODEL = "claude-opus-4-8"
# The window the proxy is told this model has: small enough that a dozen rounds of tool output outgrow it.
WINDOW = {"context_window": 110_000, "max_output": 32_000}
FINAL = "All rounds done: FINAL-ANSWER-42"
LINES_PER_ROUND = 1500


def _problems(payload: dict[str, Any]) -> list[str]:
    """What the real API would refuse in a request: thinking not as signed, tool uses and results not paired."""
    problems = []
    open_uses: set[str] = set()
    for index, message in enumerate(payload.get("messages", [])):
        blocks = message.get("content") if isinstance(message.get("content"), list) else []
        results = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
        if message.get("role") == "user" and results != open_uses:
            problems.append(f"messages.{index}: results {sorted(results)} for uses {sorted(open_uses)}")
        for block in blocks:
            if block.get("type") == "thinking" and block.get("signature") != signature(block.get("thinking", "")):
                problems.append(f"messages.{index}: a thinking block with a signature not its own")
        if message.get("role") != "system":
            open_uses = {b["id"] for b in blocks if b.get("type") == "tool_use"}
    if breakpoints(payload) > MAX_BREAKPOINTS:
        problems.append(f"{breakpoints(payload)} cache_control blocks: at most {MAX_BREAKPOINTS}")
    return problems


def breakpoints(payload: dict[str, Any]) -> int:
    """The request's cache_control markers: on tools, system blocks and message blocks (tool results' too)."""
    groups = [payload.get("tools"), payload.get("system")]
    groups += [m.get("content") for m in payload.get("messages", []) if isinstance(m, dict)]
    return sum(1 for group in groups if isinstance(group, list) for block in group if marker(block) is not None)


class ScriptedModel:
    def __init__(self, rounds: int) -> None:
        self.rounds = rounds
        self.requests: list[dict[str, Any]] = []

    async def handle(self, request: Request) -> Response:
        if request.method == "HEAD":
            return Response()
        payload = json.loads(await request.body())
        results = sum(
            1
            for m in payload.get("messages", [])
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        )
        thinking_blocks = sum(
            1
            for m in payload.get("messages", [])
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "thinking"
        )
        problems = _problems(payload)
        done = sum(1 for r in self.requests if r["tools"])  # rounds asked for so far: one per request with tools
        self.requests.append(
            {
                "path": request.url.path,
                "query": request.url.query,
                "beta": request.headers.get("anthropic-beta", ""),
                "x_api_key": request.headers.get("x-api-key"),
                "anthropic_version": request.headers.get("anthropic-version"),
                "proxy_headers": [name for name in request.headers if name.lower().startswith("x-compaction-")],
                "messages": len(payload.get("messages", [])),
                "tool_results": results,
                "thinking_blocks": thinking_blocks,
                "tools": bool(payload.get("tools")),
                "thinking": payload.get("thinking"),
                "stream": payload.get("stream"),
                "problems": problems,
                "breakpoints": breakpoints(payload),
            }
        )
        if problems:
            error = {"type": "error", "error": {"type": "invalid_request_error", "message": "; ".join(problems)}}
            return JSONResponse(error, 400)
        thinking = f"Round {done}: {len(payload.get('messages', []))} messages so far."
        content: list[dict[str, Any]] = [{"type": "thinking", "thinking": thinking, "signature": signature(thinking)}]
        if payload.get("tools") and done < self.rounds:
            start = done * 1_000_000
            command = f"seq {start} {start + LINES_PER_ROUND}"
            content.append({"type": "text", "text": f"Round {done}."})
            tool_input = {"command": command, "description": f"Print round {done}'s numbers"}
            content.append({"type": "tool_use", "id": f"toolu_{done:04}", "name": "Bash", "input": tool_input})
            stop = "tool_use"
        else:
            content.append({"type": "text", "text": FINAL})
            stop = "end_turn"
        usage = {
            "input_tokens": 100,
            "output_tokens": 20,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        answer = {
            "id": f"msg_{len(self.requests):04}",
            "type": "message",
            "role": "assistant",
            "model": payload.get("model", MODEL),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not payload.get("stream"):
            return JSONResponse(answer)

        async def events() -> Any:
            for event in message_events(answer):
                yield event

        return StreamingResponse(events(), media_type="text/event-stream")


def run(claude: str, rounds: int) -> dict[str, Any]:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    model = ScriptedModel(rounds)
    standin = Starlette(routes=[Route("/{path:path}", model.handle, methods=["GET", "POST", "HEAD"])])
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as project:
        Path(project, "README.md").write_text("A project of numbers.\n")
        with LoopbackServer(standin) as upstream:
            settings = Settings(
                anthropic_base_url=upstream.url,
                upstream_base_url=f"{upstream.url}/v1",
                models={MODEL: WINDOW},  # type: ignore[dict-item]
            )
            with LoopbackServer(create_app(settings), settings) as proxy:
                metrics_before = _removed(proxy.url)
                env = {
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "HOME": home,
                    "ANTHROPIC_BASE_URL": proxy.url,
                    "ANTHROPIC_API_KEY": "sk-ant-test",
                    "DISABLE_TELEMETRY": "1",
                    "DISABLE_AUTOUPDATER": "1",
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                    "DISABLE_ERROR_REPORTING": "1",
                }
                prompt = "Print the numbers of each round with the Bash tool, then tell me when all rounds are done."
                done = subprocess.run(
                    [claude, "-p", prompt, "--output-format", "json", "--allowedTools", "Bash", "--model", MODEL],
                    cwd=project,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=240,
                )
                removed = _removed(proxy.url) - metrics_before
    return {
        "returncode": done.returncode,
        "stdout": done.stdout[-4000:],
        "stderr": done.stderr[-4000:],
        "requests": model.requests,
        "tokens_removed": removed,
    }


def _removed(url: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    series = 'compaction_proxy_tokens_removed_total{wire="messages"}'
    lines = [line for line in text.splitlines() if line.startswith(series)]
    return float(lines[0].split()[-1]) if lines else 0.0


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], int(sys.argv[2]))))
