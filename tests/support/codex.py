"""Codex CLI run for real through the proxy, against a scripted model on loopback: `python -m tests.support.codex`
inside a private network namespace (tests/system/test_codex.py starts it under `unshare -n`), so nothing leaves it.

The scripted model answers the first `rounds` requests with a reasoning item (encrypted content of its own) and a
shell call printing a few kilobytes, so the history Codex sends grows round by round, then with a final answer.
Custom tool `exec` (JavaScript) for the code-mode models, function `exec_command` where the request offers it
(`-m gpt-5.5`). Over a WebSocket it answers each response.create frame the same way. It prints what it saw as
one JSON object: Codex's exit code and output, every input the model received, and how the proxy answered each
WebSocket handshake Codex made (426 refused, 101 accepted).

With --resumed N it runs the expand tool instead (run_resumed): a session of one round that Codex ran is
lengthened to N earlier rounds, each reading a build log of its own, and resumed twice through the proxy's default
chain. On the first resume the model (ExpandingModel) finds the masked logs' stubs, expands the oldest one's ref,
and says what it read; on the second it finds that round shown again and just finishes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from app import Settings, create_app
from strategies.refs import EXPAND_TOOL, refs_in
from tests.support.servers import LoopbackServer
from tests.support.upstream import responses_events

FINAL = "All rounds done: the build log was read."
COMMAND = "seq -f 'line %g of the build log, with enough words to make it long' 1 120"
# What Codex needs to run unattended, and nothing it would fetch: the start of every config.toml the tests write.
UNATTENDED = """approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
"""
OFFLINE = """[analytics]
enabled = false
[features]
plugins = false
apps = false
remote_plugin = false
"""
CONFIG = (
    'model_provider = "standin"\n'
    + UNATTENDED
    + OFFLINE
    + """[model_providers.standin]
name = "standin"
base_url = "{base_url}"
wire_api = "responses"
env_key = "STANDIN_API_KEY"
supports_websockets = {websockets}
"""
)


def reasoning_item(n: int) -> dict[str, Any]:
    return {"id": f"rs_scripted_{n}", "type": "reasoning", "summary": [], "encrypted_content": f"ZW5j{n:04d}" * 30}


class ScriptedModel:
    def __init__(self, rounds: int) -> None:
        self.rounds = rounds
        self.answered = 0
        self.inputs: list[list[dict[str, Any]]] = []  # every request's input, HTTP and socket frames alike
        self.posts = 0
        self.handshakes = 0
        self.app = Starlette(
            routes=[
                WebSocketRoute("/v1/responses", self.socket),
                Route("/v1/responses", self.post, methods=["POST"]),
            ]
        )

    def events(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The next answer of the script, as stream events."""
        self.inputs.append(body.get("input") or [])
        n = self.answered
        self.answered += 1
        model = body.get("model", "standin")
        events = responses_events(model, FINAL)
        if n >= self.rounds:
            return events
        functions = any(t.get("name") == "exec_command" for t in body.get("tools") or [] if isinstance(t, dict))
        if functions:
            call = {"type": "function_call", "id": f"fc_{n}", "status": "completed", "call_id": f"call_{n}",
                    "name": "exec_command", "arguments": json.dumps({"cmd": COMMAND})}  # fmt: skip
        else:
            code = f"const r = await tools.exec_command({{cmd: {json.dumps(COMMAND)}}});\ntext(r.output);\n"
            call = {"type": "custom_tool_call", "id": f"ctc_{n}", "status": "completed", "call_id": f"call_{n}",
                    "name": "exec", "input": code}  # fmt: skip
        completed = events[-1]
        output = [reasoning_item(n), call]
        done = [{"type": "response.output_item.done", "output_index": i, "item": item} for i, item in enumerate(output)]
        final = {**completed, "response": {**completed["response"], "output": output}}
        return [*events[:2], *done, final]

    async def post(self, request: Request) -> Response:
        self.posts += 1
        body = json.loads(await request.body())
        lines = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in self.events(body)]
        return StreamingResponse(iter(lines), media_type="text/event-stream")

    async def socket(self, websocket: WebSocket) -> None:
        self.handshakes += 1
        await websocket.accept()
        try:
            while True:
                frame = json.loads(await websocket.receive_text())
                if frame.get("generate") is False:  # a prewarm: an empty response, nothing generated
                    for event in responses_events(frame.get("model", "standin"), "")[:2]:
                        await websocket.send_text(json.dumps(event))
                    empty = responses_events(frame.get("model", "standin"), "")[-1]
                    empty["response"]["output"] = []
                    await websocket.send_text(json.dumps(empty))
                    continue
                for event in self.events(frame):
                    await websocket.send_text(json.dumps(event))
        except WebSocketDisconnect:
            pass


class SocketAnswers:
    """In front of the proxy: the status each WebSocket handshake was answered with, as it went to the client."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.statuses: list[int] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return

        async def answering(message: Message) -> None:
            if message["type"] == "websocket.accept":
                self.statuses.append(101)
            elif message["type"] == "websocket.http.response.start":  # a refusal, with its status
                self.statuses.append(message["status"])
            await send(message)

        await self.app(scope, receive, answering)


RESUMED_FINAL = "Done: the first build log was read again."


def _text(output: Any) -> str:
    """An output item's text: a string, or the text of its parts."""
    if isinstance(output, list):
        return "".join(part.get("text", "") for part in output if isinstance(part, dict))
    return output if isinstance(output, str) else ""


class ExpandingModel:
    """The model of a resumed session: with the expand tool offered and a stub with a ref in the tool outputs, it
    reasons and expands the oldest stub's ref (unless it did already, in what it is sent); given the expansion, it
    says its first line; else it finishes. Every response's output is kept, to check what comes back against it.
    """

    def __init__(self) -> None:
        self.inputs: list[list[dict[str, Any]]] = []
        self.tools: list[list[Any]] = []
        self.produced: dict[str, list[dict[str, Any]]] = {}
        self.app = Starlette(routes=[Route("/v1/responses", self.post, methods=["POST"])])

    def answer(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        items: list[dict[str, Any]] = body.get("input") or []
        n = len(self.inputs)
        self.inputs.append(items)
        self.tools.append(body.get("tools") or [])
        last = items[-1] if items else {}
        if last.get("type") == "function_call_output" and str(last.get("call_id")).startswith("call_expand"):
            return [], "Read it: " + next(line for line in _text(last.get("output")).splitlines() if "log" in line)
        offered = any(t.get("name") == EXPAND_TOOL for t in body.get("tools") or [] if isinstance(t, dict))
        done = any(i.get("type") == "function_call" and i.get("name") == EXPAND_TOOL for i in items)
        refs = [
            r for i in items if str(i.get("type")).endswith("_call_output") for r in refs_in(_text(i.get("output")))
        ]
        if offered and refs and not done:
            call = {"type": "function_call", "id": f"fc_expand_{n}", "status": "completed",
                    "call_id": f"call_expand_{n}", "name": EXPAND_TOOL,
                    "arguments": json.dumps({"ref": refs[0]})}  # fmt: skip
            return [reasoning_item(1000 + n), call], ""
        return [], RESUMED_FINAL

    async def post(self, request: Request) -> Response:
        body = json.loads(await request.body())
        output, text = self.answer(body)
        # No input count to learn from (0 is not taken as one): a fixed one, far from the prompt's size, would teach
        # the proxy a ratio at the clamp, whose counts then tip the epoch decisions one way or the other with the
        # session's random ids. This session is about the rounds; calibration is tests/app/forwarding's.
        events = responses_events(body.get("model", "standin"), text, input_tokens=0)
        response_id = f"resp_expanding_{len(self.inputs)}"
        for event in events:
            if "response" in event:
                event["response"] = {**event["response"], "id": response_id}
        if output:  # reasoning and a call: no message
            completed = events[-1]
            done = [
                {"type": "response.output_item.done", "output_index": i, "item": item} for i, item in enumerate(output)
            ]
            events = [*events[:2], *done, {**completed, "response": {**completed["response"], "output": output}}]
        else:
            output = events[-1]["response"]["output"]
            output[0]["id"] = f"msg_{response_id}"
            for event in events:
                if "item_id" in event:
                    event["item_id"] = output[0]["id"]
                if isinstance(event.get("item"), dict):
                    event["item"] = {**event["item"], "id": output[0]["id"]}
        self.produced[response_id] = output
        lines = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]
        return StreamingResponse(iter(lines), media_type="text/event-stream")


class HeaderLog:
    """The proxy's app, recording the X-Compaction-* headers of each /v1/responses answer."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.answers: list[dict[str, str]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/responses":
            return await self.app(scope, receive, send)

        async def record(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = {k.decode().lower(): v.decode() for k, v in message.get("headers", [])}
                self.answers.append({k: v for k, v in headers.items() if k.startswith("x-compaction-")})
            await send(message)

        return await self.app(scope, receive, record)


def _shorter(output: Any, lines: int) -> Any:
    """A tool output's text cut to its first lines (a string, or its parts)."""
    if isinstance(output, str):
        return "".join(output.splitlines(keepends=True)[:lines])
    if isinstance(output, list):
        return [{**p, "text": _shorter(p["text"], lines)} if isinstance(p.get("text"), str) else p for p in output]
    return output


# Lines of each old build log: enough that masking the old logs pays for the cache it breaks (the break-even rule,
# strategies.epochs: it removes more than half of the request), few enough that the masked session fits the window.
LOG_LINES = 30


def lengthen(home: str, rounds: int) -> None:
    """The session Codex wrote, its one round made `rounds` rounds, each reading a build log of its own (ids and
    text made distinct, each log LOG_LINES lines), as if Codex had run them all.
    """
    (path,) = Path(home, "sessions").rglob("rollout-*.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    items = [(i, line["payload"]) for i, line in enumerate(lines) if line.get("type") == "response_item"]
    start = next(i for i, payload in items if payload.get("type") == "reasoning")
    end = next(i for i, payload in items if str(payload.get("type")).endswith("_call_output"))
    template = json.dumps(lines[start : end + 1])
    out = lines[:start]
    for n in range(rounds):
        text = template.replace("rs_scripted_0", f"rs_old_{n}").replace("call_0", f"call_old_{n}")
        text = text.replace('"ctc_0"', f'"ctc_old_{n}"').replace('"fc_0"', f'"fc_old_{n}"')
        round_ = json.loads(text.replace("of the build log", f"of build log {n}"))
        for line in round_:
            payload = line.get("payload")
            if line.get("type") == "response_item" and str(payload.get("type")).endswith("_call_output"):
                payload["id"] = f"out_old_{n}"
                payload["output"] = _shorter(payload["output"], LOG_LINES)
        out += round_
    out += lines[end + 1 :]
    for ordinal, line in enumerate(out):
        if "ordinal" in line:
            line["ordinal"] = ordinal
    path.write_text("".join(json.dumps(line) + "\n" for line in out))


def run_resumed(codex: str, model: str | None, rounds: int) -> dict[str, Any]:
    """One round run for real, lengthened to `rounds`, then resumed twice with the default chain."""
    with tempfile.TemporaryDirectory() as home:
        env = {"PATH": os.environ["PATH"], "HOME": home, "CODEX_HOME": home, "STANDIN_API_KEY": "sk-standin"}
        argv = [codex, "exec", "--skip-git-repo-check", *(["-m", model] if model else [])]

        def codex_run(args: list[str], base_url: str) -> subprocess.CompletedProcess[str]:
            Path(home, "config.toml").write_text(CONFIG.format(base_url=base_url, websockets="false"))
            return subprocess.run([*argv, *args], cwd=home, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=180)  # fmt: skip

        scripted = ScriptedModel(1)
        with LoopbackServer(scripted.app) as upstream:
            first = codex_run(["Read the build log once, then say you are done."], f"{upstream.url}/v1")
        lengthen(home, rounds)
        expanding = ExpandingModel()
        with LoopbackServer(expanding.app) as upstream:
            settings = Settings(upstream_base_url=f"{upstream.url}/v1")  # the default chain: minify,mask,window
            proxy_app = HeaderLog(create_app(settings))
            with LoopbackServer(proxy_app, settings) as proxy:
                prompts = ["What did the first build log say?", "Thanks. Now finish."]
                resumed = [codex_run(["resume", "--last", prompt], f"{proxy.url}/v1") for prompt in prompts]
    return {
        "exit": [first.returncode, *(r.returncode for r in resumed)],
        "stdout": [r.stdout for r in resumed],
        "stderr": [first.stderr[-3000:], *(r.stderr[-3000:] for r in resumed)],
        "inputs": expanding.inputs,
        "tools": expanding.tools,
        "produced": expanding.produced,
        "session_reasoning": reasoning_item(0),
        "headers": proxy_app.answers,
    }


def run(codex: str, model: str | None, websockets: str, rounds: int, chain: str) -> dict[str, Any]:
    scripted = ScriptedModel(rounds)
    with LoopbackServer(scripted.app) as upstream, tempfile.TemporaryDirectory() as home:
        settings = Settings(
            upstream_base_url=f"{upstream.url}/v1",
            default_strategies=chain,
            responses_websocket=websockets if websockets != "off" else "refuse",
        )
        answers = SocketAnswers(create_app(settings))
        with LoopbackServer(answers, settings) as proxy:
            config = CONFIG.format(base_url=f"{proxy.url}/v1", websockets="true" if websockets != "off" else "false")
            Path(home, "config.toml").write_text(config)
            env = {"PATH": os.environ["PATH"], "HOME": home, "CODEX_HOME": home, "STANDIN_API_KEY": "sk-standin"}
            argv = [codex, "exec", "--skip-git-repo-check", *(["-m", model] if model else [])]
            done = subprocess.run(
                [*argv, "Read the build log once per round, then say you are done."],
                cwd=home,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=120,
            )
    return {
        "exit": done.returncode,
        "stdout": done.stdout,
        "stderr": done.stderr[-4000:],
        "inputs": scripted.inputs,
        "posts": scripted.posts,
        "handshakes": scripted.handshakes,
        "proxy_handshakes": answers.statuses,
        "reasoning": [reasoning_item(n) for n in range(rounds)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.codex")
    parser.add_argument("codex")
    parser.add_argument("--model")
    parser.add_argument("--websockets", choices=["off", "refuse", "relay"], default="off")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--chain", default="window(budget=6000)")
    parser.add_argument("--resumed", type=int, help="run the expand tool on a resumed session of this many rounds")
    args = parser.parse_args()
    if args.resumed:
        json.dump(run_resumed(args.codex, args.model, args.resumed), sys.stdout)
    else:
        json.dump(run(args.codex, args.model, args.websockets, args.rounds, args.chain), sys.stdout)


if __name__ == "__main__":
    main()
