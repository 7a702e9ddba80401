"""Claude Code, run for real against the proxy and a scripted stand-in Messages upstream, all inside one private
network namespace: `unshare -n python -m tests.support.claude_code CLAUDE ROUNDS [resumed]` brings up its loopback,
starts the stand-in and the proxy on it, runs `claude -p` in an empty home and project, and prints a JSON report.

The stand-in plays the model as the API would: every answer opens with a signed thinking block, and it refuses (400,
as the API does) a request whose thinking blocks are not the ones it signed, whose tool results answer no tool use
of the turn before, whose tool uses have no result, or that carries more than 4 cache_control breakpoints. For
ROUNDS turns it asks for a Bash call whose output is several thousand tokens, so the history grows past the window
the proxy is given for the model; then it answers.

`resumed`: Claude Code resumes (`--resume`) a session of ROUNDS Bash calls written where it keeps its sessions
(resumable_session), so the proxy's mask stubs all but the newest results; the model (Reader) expands the oldest
result's stub, runs one more Bash call on what it read, and finishes. Besides the API's rules the stand-in checks that
every turn of its own comes back exactly as it wrote it, and the report has the proxy's answers' headers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from app import Settings, create_app
from app.wire.cache_control import MAX_BREAKPOINTS, marker
from strategies.refs import EXPAND_TOOL, refs_in
from tests.support.messages_upstream import message_events, signature
from tests.support.servers import LoopbackServer

MODEL = "claude-opus-4-8"
# The window the proxy is told this model has: small enough that a dozen rounds of tool output outgrow it.
WINDOW = {"context_window": 110_000, "max_output": 32_000}
FINAL = "All rounds done: FINAL-ANSWER-42"
LINES_PER_ROUND = 1500
RESUMED_LINES = 120  # a resumed session's outputs: each short, hundreds of them
# Its window: the model's own, which the session (170k tokens) fits in once masked, with no cut.
RESUMED_WINDOW = {"context_window": 200_000, "max_output": 32_000}

# Without these Claude Code also makes a title call and tries hosts outside the machine.
QUIET = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_ERROR_REPORTING": "1",
}


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
        self.written: list[Any] = []  # every turn it wrote (the Reader's checks them)

    def reply(self, payload: dict[str, Any], done: int) -> tuple[list[dict[str, Any]], str]:
        """What the model writes, and why it stops: a Bash call for each of the first rounds, then the answer."""
        thinking = f"Round {done}: {len(payload.get('messages', []))} messages so far."
        content: list[dict[str, Any]] = [{"type": "thinking", "thinking": thinking, "signature": signature(thinking)}]
        if payload.get("tools") and done < self.rounds:
            start = done * 1_000_000
            command = f"seq {start} {start + LINES_PER_ROUND}"
            content.append({"type": "text", "text": f"Round {done}."})
            tool_input = {"command": command, "description": f"Print round {done}'s numbers"}
            content.append({"type": "tool_use", "id": f"toolu_{done:04}", "name": "Bash", "input": tool_input})
            return content, "tool_use"
        content.append({"type": "text", "text": FINAL})
        return content, "end_turn"

    def own_turns(self, payload: dict[str, Any]) -> list[str]:
        """Nothing: this model checks no turn of its own beyond the API's rules."""
        return []

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
        problems = _problems(payload) + self.own_turns(payload)
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
                "expand_offered": any(t.get("name") == EXPAND_TOOL for t in payload.get("tools") or []),
                "stubs": sum(1 for b in _blocks(payload, "tool_result") if refs_in(str(b.get("content")))),
                "expand_calls": [b["id"] for b in _blocks(payload, "tool_use") if b.get("name") == EXPAND_TOOL],
            }
        )
        if problems:
            error = {"type": "error", "error": {"type": "invalid_request_error", "message": "; ".join(problems)}}
            return JSONResponse(error, 400)
        content, stop = self.reply(payload, done)
        self.written.append(content)
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


def _blocks(payload: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [
        b
        for m in payload.get("messages", [])
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == kind
    ]


def _signed(text: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": signature(text)}


class Reader(ScriptedModel):
    """The resumed session's model: it expands the stub of the session's first Bash output, runs `echo` on the line it
    read there, and finishes. Its own turns must come back as it wrote them, turn by turn.
    """

    def reply(self, payload: dict[str, Any], done: int) -> tuple[list[dict[str, Any]], str]:
        last = payload["messages"][-1].get("content")
        answered = (
            {b.get("tool_use_id"): b for b in last if b.get("type") == "tool_result"} if isinstance(last, list) else {}
        )
        if "toolu_echo" in answered:
            return [_signed("Model: checked."), {"type": "text", "text": FINAL}], "end_turn"
        expanded = next((b for i, b in answered.items() if str(i).startswith("toolu_x")), None)
        if expanded is not None:
            line = str(expanded.get("content")).splitlines()[0]
            echo = {"command": f"echo '{line}'", "description": "Say what round 0 printed first"}
            head = [_signed(f"Model: round 0 began with {line}."), {"type": "text", "text": f"It began with {line}."}]
            return [*head, {"type": "tool_use", "id": "toolu_echo", "name": "Bash", "input": echo}], "tool_use"
        first = next((b for b in _blocks(payload, "tool_result") if b.get("tool_use_id") == "toolu_0000"), None)
        refs = refs_in(str(first.get("content"))) if first is not None else []
        offered = any(t.get("name") == EXPAND_TOOL for t in payload.get("tools") or [])
        if refs and offered:
            call = {"type": "tool_use", "id": "toolu_x0001", "name": EXPAND_TOOL, "input": {"ref": refs[0]}}
            head = [
                _signed("Model: I need round 0's output again."),
                {"type": "text", "text": "Reading round 0 again."},
            ]
            return [*head, call], "tool_use"
        return [
            _signed("Model: nothing to read."),
            {"type": "text", "text": "Round 0's output is not stubbed."},
        ], "end_turn"

    def own_turns(self, payload: dict[str, Any]) -> list[str]:
        written = [json.dumps(turn, sort_keys=True) for turn in self.written]
        return [
            f"messages.{index}: a turn of the model's not as it wrote it"
            for index, message in enumerate(payload.get("messages", []))
            if message.get("role") == "assistant"
            and isinstance(message.get("content"), list)
            and any(str(b.get("thinking", "")).startswith("Model:") for b in message["content"])
            and json.dumps(message["content"], sort_keys=True) not in written
        ]


def resumable_session(home: str, project: str, rounds: int) -> str:
    """A session of `rounds` Bash calls and an answer, written as Claude Code keeps it (one entry per block, each
    pointing at the one before), where `claude --resume` finds it; its id.
    """
    session = str(uuid.UUID(int=rounds))
    now = datetime.now(UTC) - timedelta(minutes=5)
    cwd = os.path.realpath(project)
    common = {"isSidechain": False, "userType": "external", "entrypoint": "sdk-cli", "cwd": cwd, "sessionId": session}
    common |= {"version": "2.1.197", "gitBranch": "HEAD"}
    entries: list[dict[str, Any]] = []

    def add(kind: str, message: dict[str, Any], **extra: Any) -> str:
        parent = entries[-1]["uuid"] if entries else None
        at = (now + timedelta(milliseconds=len(entries))).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        entry = {"parentUuid": parent, **common, "type": kind, "message": message, **extra}
        entries.append({**entry, "uuid": str(uuid.UUID(int=(rounds << 32) + len(entries) + 1)), "timestamp": at})
        return str(entries[-1]["uuid"])

    def turn(number: int, blocks: list[dict[str, Any]], stop: str) -> str:
        usage = {
            "input_tokens": 100,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 20,
        }
        head = {"id": f"msg_s{number:04}", "type": "message", "role": "assistant", "model": MODEL}
        return [
            add("assistant", {**head, "content": [b], "stop_reason": stop, "stop_sequence": None, "usage": usage})
            for b in blocks
        ][-1]

    add("user", {"role": "user", "content": "Print the numbers of each round with the Bash tool."})
    for n in range(rounds):
        command = {"command": f"seq {n * 1_000_000} {n * 1_000_000 + RESUMED_LINES}", "description": f"Round {n}"}
        use = {"type": "tool_use", "id": f"toolu_{n:04}", "name": "Bash", "input": command}
        source = turn(n, [_signed(f"Round {n}."), {"type": "text", "text": f"Round {n}."}, use], "tool_use")
        printed = "".join(f"{n * 1_000_000 + k}\n" for k in range(RESUMED_LINES + 1))
        result = {"tool_use_id": use["id"], "type": "tool_result", "content": printed, "is_error": False}
        output = {"stdout": printed, "stderr": "", "interrupted": False, "isImage": False, "noOutputExpected": False}
        add("user", {"role": "user", "content": [result]}, toolUseResult=output, sourceToolAssistantUUID=source)
    turn(rounds, [_signed("All printed."), {"type": "text", "text": f"All {rounds} rounds printed."}], "end_turn")
    folder = Path(home, ".claude", "projects", re.sub(r"[^a-zA-Z0-9]", "-", cwd))
    folder.mkdir(parents=True)
    Path(folder, f"{session}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
    return session


class Answers:
    """The proxy's app, recording the status and headers of each answer it gives on /v1/messages."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/messages":
            await self.app(scope, receive, send)
            return

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = {k.decode().lower(): v.decode() for k, v in message["headers"]}
                self.seen.append({"status": message["status"], "headers": headers})
            await send(message)

        await self.app(scope, receive, sending)


def run(claude: str, rounds: int, resumed: bool = False) -> dict[str, Any]:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    model = Reader(rounds) if resumed else ScriptedModel(rounds)
    standin = Starlette(routes=[Route("/{path:path}", model.handle, methods=["GET", "POST", "HEAD"])])
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as project:
        Path(project, "README.md").write_text("A project of numbers.\n")
        with LoopbackServer(standin) as upstream:
            settings = Settings(
                anthropic_base_url=upstream.url,
                upstream_base_url=f"{upstream.url}/v1",
                models={MODEL: RESUMED_WINDOW if resumed else WINDOW},  # type: ignore[dict-item]
            )
            answers = Answers(create_app(settings))
            with LoopbackServer(answers, settings) as proxy:
                metrics_before = _removed(proxy.url)
                env = {
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "HOME": home,
                    "ANTHROPIC_BASE_URL": proxy.url,
                    "ANTHROPIC_API_KEY": "sk-ant-test",
                    **QUIET,
                }
                prompt = "Print the numbers of each round with the Bash tool, then tell me when all rounds are done."
                resume: list[str] = []
                if resumed:
                    prompt = "What did the first round print first? Check it with Bash, then finish."
                    resume = ["--resume", resumable_session(home, project, rounds)]
                done = subprocess.run(
                    [
                        claude,
                        "-p",
                        prompt,
                        *resume,
                        "--output-format",
                        "json",
                        "--allowedTools",
                        "Bash",
                        "--model",
                        MODEL,
                    ],
                    cwd=project,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=240,
                )
                removed = _removed(proxy.url) - metrics_before
                metrics = httpx.get(f"{proxy.url}/metrics").text
    return {
        "returncode": done.returncode,
        "stdout": done.stdout[-4000:],
        "stderr": done.stderr[-4000:],
        "requests": model.requests,
        "tokens_removed": removed,
        "answers": answers.seen,
        "expand_rounds": _sample(metrics, 'compaction_proxy_expand_rounds_total{outcome="answered"}'),
        "not_expandable": _sample(metrics, 'compaction_proxy_fallbacks_total{reason="not_expandable"}'),
    }


def _removed(url: str) -> float:
    return _sample(httpx.get(f"{url}/metrics").text, 'compaction_proxy_tokens_removed_total{wire="messages"}')


def _sample(metrics: str, series: str) -> float:
    lines = [line for line in metrics.splitlines() if line.startswith(series)]
    return float(lines[0].split()[-1]) if lines else 0.0


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], int(sys.argv[2]), resumed=sys.argv[3:] == ["resumed"])))
