"""`compaction-proxy wrap` run for real with a coding agent, against a scripted model on loopback:
`python -m tests.support.wrap AGENT MODE BIN` inside a private network namespace (tests/system/test_wrap.py starts
it under `unshare -n`), BIN the directory holding the agents' executables. It prints one JSON report.

The user's home holds the agent's own configuration, pointing it at the scripted model as a user points it at a
gateway or a local server: Claude Code's settings.json `env`, Codex's config.toml `openai_base_url`, opencode's
opencode.json provider. wrap is left to find that upstream: MODE `own` lets it start its own proxy, which forwards
there; MODE `proxy` gives it `--proxy` of a proxy the scenario runs (forwarding there too), whose /metrics are read
before and after. The model asks for one shell call, then answers FINAL. The report holds wrap's status and output,
the model's requests, every file of the home before and after by digest, and /metrics (MODE `proxy`).

MODE `tui` runs Claude Code's own interactive UI through wrap in a tmux pane instead (tui): the prompt typed in,
the answer awaited on the screen, the window resized, `/exit` typed; the pane's screens and wrap's status reported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.routing import Route

from app import Settings, create_app
from tests.support import claude_code, codex
from tests.support.files import digests
from tests.support.scripted_model import ScriptedModel, Turn
from tests.support.servers import LoopbackServer

ROOT = Path(__file__).resolve().parents[2]
FINAL = "FINAL-ANSWER-42: the files are listed."
PROMPT = "List the files here with the shell tool, then say you are done."
CODEX_CONFIG = codex.UNATTENDED + 'openai_base_url = "{base_url}"\n' + codex.OFFLINE
QUIET = {
    **claude_code.QUIET,
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
}


def opencode_turn(payload: dict[str, Any]) -> Turn:
    """A title call (no tools) gets a title; the loop a bash call, then, given its output, the answer."""
    messages = payload.get("messages") or []
    if not payload.get("tools"):
        return Turn(text="Listing files")
    if messages and messages[-1].get("role") == "tool":
        return Turn(text=FINAL)
    return Turn(calls=[("call_1", "bash", json.dumps({"command": "ls", "description": "List the files"}))])


class Model:
    """The scripted model of one agent: its app, how many requests it answered, and the agent's user config."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        if agent == "claude":
            self.claude = claude_code.ScriptedModel(1)
            route = Route("/{path:path}", self.claude.handle, methods=["GET", "POST", "HEAD"])
            self.app: Any = Starlette(routes=[route])
        elif agent == "codex":
            self.codex = codex.ScriptedModel(1)
            self.app = self.codex.app
        else:
            self.chat = ScriptedModel(opencode_turn)
            self.app = self.chat.app

    def requests(self) -> int:
        if self.agent == "claude":
            return len(self.claude.requests)
        if self.agent == "codex":
            return len(self.codex.inputs)
        return len(self.chat.received)

    def configure(self, home: Path, url: str) -> tuple[list[str], dict[str, str]]:
        """The user's config files in `home`, pointing the agent at `url`; the agent's arguments and environment."""
        if self.agent == "claude":
            (home / ".claude").mkdir()
            settings = {"env": {"ANTHROPIC_BASE_URL": url}, "permissions": {"allow": ["Bash(ls:*)"]}}
            (home / ".claude/settings.json").write_text(json.dumps(settings, indent=2))
            args = ["-p", PROMPT, "--output-format", "json", "--allowedTools", "Bash", "--model", claude_code.MODEL]
            return args, {"ANTHROPIC_API_KEY": "sk-ant-test"}
        if self.agent == "codex":
            (home / ".codex").mkdir()
            (home / ".codex/config.toml").write_text(CODEX_CONFIG.format(base_url=f"{url}/v1"))
            return ["exec", "--skip-git-repo-check", PROMPT], {"OPENAI_API_KEY": "sk-test-codex"}
        provider = {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Stand-in",
            "options": {"baseURL": f"{url}/v1", "apiKey": "sk-test-opencode"},
            "models": {"standin-model": {"name": "Stand-in model"}},
        }
        # With its $schema: opencode writes one into a config file that lacks it, wrap or not.
        config = {
            "$schema": "https://opencode.ai/config.json",
            "model": "standin/standin-model",
            "provider": {"standin": provider},
            "permission": {"bash": "allow"},
        }
        (home / ".config/opencode").mkdir(parents=True)
        (home / ".config/opencode/opencode.json").write_text(json.dumps(config, indent=2))
        return ["run", PROMPT], {}

    def final(self, stdout: str) -> bool:
        if self.agent == "claude":
            return json.loads(stdout or "{}").get("result", "").strip().endswith(claude_code.FINAL)
        return (codex.FINAL if self.agent == "codex" else FINAL) in stdout


def run(agent: str, mode: str, bin_dir: str) -> dict[str, Any]:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    model = Model(agent)
    with LoopbackServer(model.app) as upstream, tempfile.TemporaryDirectory() as tmp:
        home, project = Path(tmp, "home"), Path(tmp, "project")
        home.mkdir()
        project.mkdir()
        (project / "README.md").write_text("A project.\n")
        args, agent_env = model.configure(home, upstream.url)
        before_files = digests(home)
        env = {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "HOME": str(home),
            "XDG_STATE_HOME": str(Path(tmp, "state")),
            "PYTHONPATH": str(ROOT),
            **QUIET,
            **agent_env,
        }

        def wrap(*flags: str, agent_args: list[str]) -> subprocess.CompletedProcess[str]:
            argv = [sys.executable, "-m", "app", "wrap", *flags, agent, *agent_args]
            return subprocess.run(argv, cwd=project, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=240)  # fmt: skip

        metrics: dict[str, str] = {}
        if mode == "proxy":
            settings = Settings(upstream_base_url=f"{upstream.url}/v1", anthropic_base_url=upstream.url)
            with LoopbackServer(create_app(settings), settings) as proxy:
                metrics["before"] = httpx.get(f"{proxy.url}/metrics").text
                done = wrap("--proxy", proxy.url, agent_args=args)
                metrics["after"] = httpx.get(f"{proxy.url}/metrics").text
        else:
            done = wrap(agent_args=args)
        refused = wrap(agent_args=["--no-such-flag-anywhere"])  # the agent's own failure, passed on
        logs = sorted(str(p) for p in Path(tmp, "state").rglob("*.log"))
        return {
            "returncode": done.returncode,
            "stdout": done.stdout[-4000:],
            "stderr": done.stderr[-4000:],
            "first_line": done.stderr.partition("\n")[0],  # wrap's, before the agent's output
            "proxy_lines": done.stderr.count('"logger"'),  # the proxy's JSON lines, had they reached the terminal
            "final": model.final(done.stdout),
            "requests": model.requests(),
            "files_before": before_files,
            "files_after": {k: v for k, v in digests(home).items() if k in before_files},
            "metrics": metrics,
            "logs": len(logs),
            "refused": refused.returncode,
        }


class Pane:
    """A tmux server of its own (its socket in `tmp`) running one command in a pane that stays once it exits."""

    def __init__(self, tmp: Path, command: str, cwd: Path, env: dict[str, str]) -> None:
        conf = tmp / "tmux.conf"
        conf.write_text("set -g remain-on-exit on\n")
        self.tmux = ["tmux", "-S", str(tmp / "tmux.sock"), "-f", str(conf)]
        size = ["-x", "120", "-y", "40"]
        subprocess.run(
            [*self.tmux, "new-session", "-d", *size, "-c", str(cwd), "sh", "-c", command], env=env, check=True
        )

    def screen(self) -> str:
        return subprocess.run([*self.tmux, "capture-pane", "-p"], capture_output=True, text=True, check=True).stdout

    def wait_for(self, shown: Callable[[str], bool], what: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while not shown(screen := self.screen()):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen:\n{screen}")
            time.sleep(0.2)
        return screen

    def type(self, text: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-l", text], check=True)
        time.sleep(0.3)  # as a person types: the UI takes the text, then the Enter that sends it
        subprocess.run([*self.tmux, "send-keys", "Enter"], check=True)

    def resize(self, columns: int) -> None:
        subprocess.run([*self.tmux, "resize-window", "-x", str(columns)], check=True)

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], check=False)


def rule(screen: str) -> int:
    """The width of the widest horizontal rule Claude Code draws around its prompt: the window's width."""
    return max(
        (len(line.strip()) for line in screen.splitlines() if line.strip() and set(line.strip()) == {"─"}), default=0
    )


def tui(bin_dir: str) -> dict[str, Any]:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    model = Model("claude")
    with LoopbackServer(model.app) as upstream, tempfile.TemporaryDirectory() as tmp:
        home, project = Path(tmp, "home"), Path(tmp, "project")
        home.mkdir()
        project.mkdir()
        _, agent_env = model.configure(home, upstream.url)
        before_files = digests(home)
        key = agent_env["ANTHROPIC_API_KEY"]
        # Claude Code's own state (not configuration: it rewrites it as it runs): first-run questions answered,
        # the key and the project trusted, as after a first session.
        state = {
            "hasCompletedOnboarding": True,
            "theme": "dark",
            "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
            "projects": {str(project): {"hasTrustDialogAccepted": True, "allowedTools": []}},
        }
        (home / ".claude.json").write_text(json.dumps(state))
        env = {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "HOME": str(home),
            "TERM": "xterm-256color",
            "XDG_STATE_HOME": str(Path(tmp, "state")),
            "PYTHONPATH": str(ROOT),
            **QUIET,
            **agent_env,
        }
        wrap = f"{sys.executable} -m app wrap claude --model {claude_code.MODEL} --allowedTools Bash"
        pane = Pane(Path(tmp), f"{wrap}; echo WRAP-STATUS=$?", project, env)
        try:
            started = pane.wait_for(lambda s: "for shortcuts" in s, "Claude Code's prompt")
            pane.type("Print the numbers with the Bash tool, then say when you are done.")
            answered = pane.wait_for(lambda s: claude_code.FINAL in s, "the model's answer")
            pane.resize(100)
            resized = pane.wait_for(lambda s: rule(s) == 100, "the UI redrawn at 100 columns")
            pane.type("/exit")
            ended = pane.wait_for(lambda s: "WRAP-STATUS=" in s, "wrap's exit")
        finally:
            pane.close()
        return {
            "rules": [rule(started), rule(resized)],
            "answered": answered,
            "ended": ended,
            "requests": model.requests(),
            "files_before": before_files,
            "files_after": {k: v for k, v in digests(home).items() if k in before_files},
        }


if __name__ == "__main__":
    agent, mode, bin_dir = sys.argv[1], sys.argv[2], str(Path(sys.argv[3]).resolve())
    print(json.dumps(tui(bin_dir) if mode == "tui" else run(agent, mode, bin_dir)))
