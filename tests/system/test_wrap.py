"""`compaction-proxy wrap` with Claude Code, Codex CLI and opencode (the pinned versions scripts/test installs), run
for real non-interactively against a scripted model in a private network namespace (tests/support/wrap.py): each
agent's loop (one shell call, then the answer) completes through the proxy, its exit status comes back, the summary
is the proxy's /metrics for the run, and no file of the user's configuration changed.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from app.wrap.summary import Samples, Summary
from tests.support import claude_code
from tests.support.netns import isolated_report
from tests.support.required import require

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".tools" / "npm" / "node_modules" / ".bin"
AGENTS = ["claude", "codex", "opencode"]


def in_namespace(*args: str) -> dict[str, Any]:
    argv = [sys.executable, "-m", "tests.support.wrap", *args]
    return isolated_report(argv, cwd=ROOT, timeout=400, reaching="the agents reach")


def summary_of(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if re.match(r"compaction-proxy wrap: \w+ exited with \d+", line))
    return lines[at + 1 : at + 6]


def finished(agent: str, mode: str) -> dict[str, Any]:
    require((BIN / agent).exists(), f"{agent} not installed in {BIN.relative_to(ROOT)}: scripts/test installs it (npm)")
    report = in_namespace(agent, mode, str(BIN))
    assert report["returncode"] == 0 and report["final"], report["stderr"]  # the loop ran to the model's answer
    assert report["requests"] >= 2  # the shell call's round and the answer's (opencode's title call too)
    assert report["refused"] not in (0, None)  # an agent's failure is wrap's status too
    assert report["files_before"] and report["files_after"] == report["files_before"]  # config files untouched
    return report


@pytest.mark.parametrize("agent", AGENTS)
def test_through_a_running_proxy_the_summary_is_its_metrics_for_the_run(agent: str) -> None:
    report = finished(agent, "proxy")
    run = Samples.parse(report["metrics"]["after"]).since(Samples.parse(report["metrics"]["before"]))
    summary = Summary.of(run)
    assert summary_of(report["stderr"]) == summary.lines()
    assert sum(summary.requests.values()) == report["requests"]  # every request of the agent's, and no other
    assert summary.tokens_before > 0 and report["logs"] == 1  # only the status check's run started a proxy


@pytest.mark.parametrize("agent", AGENTS)
def test_wrap_starts_a_proxy_forwarding_where_the_agent_was_configured_to_go(agent: str) -> None:
    report = finished(agent, "own")
    # The agent's configured upstream (the scripted model) reached through the proxy wrap started for it.
    requests = re.match(r"  requests: (\d+) \(", summary_of(report["stderr"])[0])
    assert requests is not None and int(requests.group(1)) == report["requests"]
    assert "forwarding to" in report["first_line"] and "its log: " in report["first_line"]
    assert report["proxy_lines"] == 0 and report["logs"] == 2  # each run's proxy logged to a file of its own


def test_claude_codes_own_interactive_ui_works_through_wrap_in_a_terminal() -> None:
    """In a tmux pane: Claude Code's UI comes up, takes a typed prompt, shows the model's answer after its Bash call,
    redraws when the window narrows (SIGWINCH reached it), and `/exit` ends it; then wrap's summary, and its status.
    """
    require(shutil.which("tmux") is not None, "needs tmux(1) to drive Claude Code's interactive UI")
    require((BIN / "claude").exists(), f"claude not installed in {BIN.relative_to(ROOT)}: scripts/test installs it")
    report = in_namespace("claude", "tui", str(BIN))
    assert claude_code.FINAL in report["answered"] and "Bash(" in report["answered"]
    assert report["rules"] == [120, 100]
    ended = report["ended"].splitlines()
    assert "WRAP-STATUS=0" in ended  # Claude Code's status, through wrap
    requests = next(line for line in ended if line.startswith("  requests: "))
    assert requests == f"  requests: {report['requests']} (/v1/messages {report['requests']})"
    assert report["files_after"] == report["files_before"]
