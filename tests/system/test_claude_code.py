"""Claude Code itself, run non-interactively through the proxy against a scripted stand-in model, in a private
network namespace (tests.support.claude_code): its agent loop outgrows the window, the proxy compacts it, and every
compacted request is one the API would take (thinking as signed, tool uses and results paired), streamed, thinking on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.claude_code import FINAL
from tests.support.required import require

# scripts/test installs the pinned CLI here (npm install --prefix .tools/npm @anthropic-ai/claude-code@...).
CLAUDE = Path(__file__).resolve().parents[2] / ".tools/npm/node_modules/.bin/claude"
ROUNDS = 12


def _unavailable() -> str | None:
    if not CLAUDE.exists():
        return f"Claude Code is not installed at {CLAUDE} (scripts/test installs it with npm)"
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        return "a private network namespace needs root, unshare and ip"
    return None


def test_claude_codes_agent_loop_completes_through_the_compacting_proxy() -> None:
    reason = _unavailable()
    require(reason is None, reason or "")
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "-m", "tests.support.claude_code", str(CLAUDE), str(ROUNDS)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["returncode"] == 0, report["stderr"]
    assert json.loads(report["stdout"])["result"].strip().endswith(FINAL)
    loop = [r for r in report["requests"] if r["tools"]]
    assert len(loop) == ROUNDS + 1  # every round asked for and the answer, none refused or retried
    assert all(r["problems"] == [] for r in report["requests"])
    assert all(r["breakpoints"] == 3 for r in loop)
    assert all(r["x_api_key"] == "sk-ant-test" and r["anthropic_version"] == "2023-06-01" for r in loop)
    assert all(
        r["beta"].startswith("claude-code-20250219,") and r["proxy_headers"] == [] for r in loop
    )  # Claude Code's three (system[1], system[2], the last block)
    assert all(r["stream"] and r["thinking"] and r["query"] == "beta=true" for r in loop)
    # Round n's request holds n results when whole: fewer, once the history outgrew the window, is the compaction.
    assert any(r["tool_results"] < n for n, r in enumerate(loop))
    assert report["tokens_removed"] > 0
    assert all(r["thinking_blocks"] == r["tool_results"] for r in loop)  # each kept turn with its signed thinking
