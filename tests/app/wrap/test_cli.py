"""`compaction-proxy wrap` as a user runs it, the agent a small script: the proxy it starts (or --proxy's) gets the
agent's requests, its log goes to a file, the agent's status comes back, and the summary is the proxy's /metrics for
this run alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.wrap.cli import split
from app.wrap.summary import Samples, Summary
from tests.support.metrics import scrape
from tests.support.process import ProxyProcess
from tests.support.servers import refuses_connections
from tests.support.upstream import StandInUpstream

ROOT = Path(__file__).resolve().parents[3]
KEY = "sk-wrap-secret-123"
# The agent: two chat requests through OPENAI_BASE_URL, what the proxy's headers said of them, and /metrics (at
# ANTHROPIC_BASE_URL, the proxy's root) once it is done; it exits 4.
AGENT = f"""
import json, os, sys, httpx
from pathlib import Path
base = os.environ["OPENAI_BASE_URL"]
seen = []
for n in (1, 2):
    call = {{"id": "call_1", "type": "function", "function": {{"name": "read", "arguments": "{{}}"}}}}
    history = [
        {{"role": "user", "content": "Read the log."}},
        {{"role": "assistant", "content": None, "tool_calls": [call]}},
        {{"role": "tool", "tool_call_id": "call_1", "content": "a line of the build log\\n" * 400 * n}},
        {{"role": "user", "content": "And now?"}},
    ]
    body = {{"model": "standin-model", "messages": history}}
    answer = httpx.post(base + "/chat/completions", json=body, headers={{"Authorization": "Bearer {KEY}"}}, timeout=30)
    seen.append([answer.status_code, *(int(answer.headers["x-compaction-tokens-" + s]) for s in ("before", "after"))])
metrics = httpx.get(os.environ["ANTHROPIC_BASE_URL"] + "/metrics").text
page = httpx.get(os.environ["ANTHROPIC_BASE_URL"] + "/dashboard").status_code
Path(sys.argv[1]).write_text(json.dumps({{"seen": seen, "metrics": metrics, "openai": base, "page": page}}))
sys.exit(4)
"""


@pytest.mark.parametrize(
    ("argv", "flags", "command", "after_dashes"),
    [
        (
            ["--upstream", "U", "claude", "-p", "--upstream", "V"],
            ["--upstream", "U"],
            ["claude", "-p", "--upstream", "V"],
            False,
        ),
        (["--upstream=U", "--", "cmd", "--", "x"], ["--upstream=U"], ["cmd", "--", "x"], True),
        (["codex"], [], ["codex"], False),
        (["-h"], ["-h"], [], False),
    ],
)
def test_the_agents_arguments_start_at_the_first_word_that_is_no_flag_of_wraps(
    argv: list[str], flags: list[str], command: list[str], after_dashes: bool
) -> None:
    assert split(argv) == (flags, command, after_dashes)


def _wrap(tmp_path: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("COMPACTION_", "OPENAI_", "ANTHROPIC_"))}
    home = {"HOME": str(tmp_path / "home"), "XDG_STATE_HOME": str(tmp_path / "state")}
    return subprocess.run(
        [sys.executable, "-m", "app", "wrap", *argv],
        cwd=ROOT,
        env={**base, **home, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _agent(tmp_path: Path) -> list[str]:
    (tmp_path / "agent.py").write_text(AGENT)
    return [sys.executable, str(tmp_path / "agent.py"), str(tmp_path / "report.json")]


def _posts(upstream: StandInUpstream) -> list[str]:
    """The requests forwarded (the proxy also asks the upstream about the unknown model's window)."""
    return [r.path for r in upstream.received if r.method == "POST"]


def _summary(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if "exited with" in line)
    return lines[at + 1 :]


def test_wrap_starts_a_proxy_runs_the_command_through_it_and_sums_up_what_metrics_say(
    tmp_path: Path, upstream: StandInUpstream
) -> None:
    done = _wrap(tmp_path, "--upstream", f"{upstream.url}/v1", "--context-window", "400", "--", *_agent(tmp_path))  # type: ignore[attr-defined]
    assert done.returncode == 4, done.stderr  # the agent's own
    report: dict[str, Any] = json.loads((tmp_path / "report.json").read_text())
    assert [s[0] for s in report["seen"]] == [200, 200]
    assert _posts(upstream) == ["/v1/chat/completions"] * 2  # through the --upstream
    assert any(after < before for _, before, after in report["seen"])  # --context-window reached the proxy
    # A fresh proxy: what /metrics said once the agent was done is this run.
    summary = _summary(done.stderr)
    assert summary == Summary.of(Samples.parse(report["metrics"])).lines()
    before, after = (sum(s[k] for s in report["seen"]) for k in (1, 2))
    assert summary[:2] == [
        "  requests: 2 (/v1/chat/completions 2)",
        f"  prompt tokens: {before:,} before compaction, {after:,} after, {before - after:,} removed",
    ]
    # The proxy's lines went to its log, named once; none reached the terminal, and the key is in neither.
    (log,) = (tmp_path / "state/compaction-proxy/wrap").iterdir()
    assert f"its log: {log}" in done.stderr.splitlines()[0]
    proxy = report["openai"].removesuffix("/v1")
    assert (
        done.stderr.splitlines()[1] == f"compaction-proxy wrap: savings page, while the agent runs: {proxy}/dashboard"
    )
    assert report["page"] == 200
    assert "compaction-proxy on http://127.0.0.1:" in log.read_text() and '"logger"' not in done.stderr
    assert KEY not in log.read_text() + done.stderr + done.stdout
    port = int(report["openai"].rsplit(":", 1)[1].removesuffix("/v1"))
    assert refuses_connections(port)  # stopped with the agent


def test_through_a_running_proxy_only_this_runs_requests_count_and_it_keeps_running(
    tmp_path: Path, upstream: StandInUpstream
) -> None:
    with ProxyProcess("--upstream", f"{upstream.url}/v1", "--context-window", "400") as proxy:  # type: ignore[attr-defined]
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "someone else " * 500}]}
        assert httpx.post(f"{proxy.url}/v1/chat/completions", json=body).status_code == 200
        before = scrape(proxy.url)
        done = _wrap(tmp_path, "--proxy", f"{proxy.url}/v1", "--", *_agent(tmp_path))
        assert done.returncode == 4, done.stderr
        run = Samples.parse(httpx.get(f"{proxy.url}/metrics").text).since(Samples(before.values))
        assert _summary(done.stderr) == Summary.of(run).lines()
        assert _summary(done.stderr)[0] == "  requests: 2 (/v1/chat/completions 2)"
        assert httpx.get(f"{proxy.url}/readyz").status_code == 200
    assert not (tmp_path / "state").exists()  # no proxy of its own, no log


def test_the_agents_own_upstream_becomes_the_started_proxys(tmp_path: Path, upstream: StandInUpstream) -> None:
    done = _wrap(tmp_path, "--", *_agent(tmp_path), env={"OPENAI_BASE_URL": f"{upstream.url}/v1"})  # type: ignore[attr-defined]
    assert done.returncode == 4, done.stderr
    assert _posts(upstream) == ["/v1/chat/completions"] * 2
    assert f"forwarding to {upstream.url}/v1 (OpenAI API)" in done.stderr  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("argv", "status", "said"),
    [
        (["aider"], 1, "unknown agent 'aider': one of claude, codex, opencode, or -- CMD"),
        (["--", "no-such-command-here"], 127, "no-such-command-here: not found on PATH"),
        (["--upstream", "not a url", "--", "true"], 1, "invalid settings:\n  upstream_base_url"),
    ],
)
def test_what_wrap_cannot_run_it_says_before_starting_anything(
    tmp_path: Path, argv: list[str], status: int, said: str
) -> None:
    done = _wrap(tmp_path, *argv)
    assert done.returncode == status and said in done.stderr
    assert not (tmp_path / "state").exists()


def test_bare_flags_still_serve() -> None:
    with ProxyProcess("--context-window", "5000") as proxy:
        assert httpx.get(f"{proxy.url}/healthz").json() == {"status": "ok"}
