"""Codex CLI run for real through the proxy, against a scripted model on loopback: `python -m tests.support.codex`
inside a private network namespace (tests/system/test_codex.py starts it under `unshare -n`), so nothing leaves it.

The scripted model answers the first `rounds` requests with a reasoning item (encrypted content of its own) and a
shell call printing a few kilobytes, so the history Codex sends grows round by round, then with a final answer.
Custom tool `exec` (JavaScript) for the code-mode models, function `exec_command` where the request offers it
(`-m gpt-5.5`). Over a WebSocket it answers each response.create frame the same way. It prints what it saw as
one JSON object: Codex's exit code and output, every input the model received, and how the proxy answered each
WebSocket handshake Codex made (426 refused, 101 accepted).
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
from tests.support.servers import LoopbackServer
from tests.support.upstream import responses_events

FINAL = "All rounds done: the build log was read."
COMMAND = "seq -f 'line %g of the build log, with enough words to make it long' 1 120"
CONFIG = """model_provider = "standin"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
[analytics]
enabled = false
[features]
plugins = false
apps = false
remote_plugin = false
[model_providers.standin]
name = "standin"
base_url = "{base_url}"
wire_api = "responses"
env_key = "STANDIN_API_KEY"
supports_websockets = {websockets}
"""


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
    args = parser.parse_args()
    json.dump(run(args.codex, args.model, args.websockets, args.rounds, args.chain), sys.stdout)


if __name__ == "__main__":
    main()
