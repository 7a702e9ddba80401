"""Claude Code itself, run non-interactively through the proxy against a scripted stand-in model, in a private
network namespace (tests.support.claude_code): its agent loop outgrows the window, the proxy compacts it, and every
compacted request is one the API would take (thinking as signed, tool uses and results paired), streamed, thinking on.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.support.claude_code import FINAL
from tests.support.netns import isolated_report
from tests.support.required import require

# scripts/test installs the pinned CLI here (npm install --prefix .tools/npm @anthropic-ai/claude-code@...).
CLAUDE = Path(__file__).resolve().parents[2] / ".tools/npm/node_modules/.bin/claude"
ROUNDS = 12


def _finished_session(*args: str) -> dict[str, Any]:
    """Claude Code run by tests.support.claude_code (in a network namespace of its own) with these arguments: its
    report, once the run and Claude Code both exited 0 with the scripted model's final answer.
    """
    require(CLAUDE.exists(), f"Claude Code is not installed at {CLAUDE} (scripts/test installs it with npm)")
    argv = [sys.executable, "-m", "tests.support.claude_code", str(CLAUDE), *args]
    report = isolated_report(argv, cwd=Path(__file__).resolve().parents[2], timeout=300, reaching="Claude Code reaches")
    assert report["returncode"] == 0, report["stderr"]
    assert json.loads(report["stdout"])["result"].strip().endswith(FINAL)
    return report


def test_claude_codes_agent_loop_completes_through_the_compacting_proxy() -> None:
    report = _finished_session(str(ROUNDS))
    loop = [r for r in report["requests"] if r["tools"]]
    assert len(loop) == ROUNDS + 1  # every round asked for and the answer, none refused or retried
    assert all(r["problems"] == [] for r in report["requests"])
    assert all(r["breakpoints"] == 3 for r in loop)
    assert all(r["x_api_key"] == "sk-ant-test" and r["anthropic_version"] == "2023-06-01" for r in loop)
    assert all(
        r["beta"].startswith("claude-code-20250219,") and r["proxy_headers"] == [] for r in loop
    )  # Claude Code's three (system[1], system[2], the last block)
    assert all(r["stream"] and r["thinking"] and r["query"] == "beta=true" for r in loop)
    # Round n's request holds n results when whole: fewer whole ones, once the history outgrew the window, is the
    # compaction (mask degrades first: stubs with a ref, then units left out behind one).
    assert any(r["tool_results"] - r["stubs"] < n for n, r in enumerate(loop))
    assert report["tokens_removed"] > 0
    assert all(r["thinking_blocks"] == r["tool_results"] for r in loop)  # each kept turn with its signed thinking


RESUMED_ROUNDS = 300


def test_a_resumed_session_of_hundreds_of_results_expands_a_ref_and_finishes() -> None:
    """Claude Code resumes a session of 300 Bash results: the default chain masks all but the newest, the model
    expands the first one's stub (the proxy answers it, in the same stream), runs one more command on what it read,
    and finishes; the round is shown again on Claude Code's next request, the model's turns as it wrote them.
    """
    report = _finished_session(str(RESUMED_ROUNDS), "resumed")
    requests = report["requests"]
    # The expand round, the proxy's request with its result, then Claude Code's after the Bash call it led to.
    assert len(requests) == 3 and all(r["problems"] == [] for r in requests)
    assert all(r["expand_offered"] and r["breakpoints"] <= 4 and r["thinking"] for r in requests)
    first = requests[0]
    assert first["tool_results"] == RESUMED_ROUNDS and first["stubs"] >= RESUMED_ROUNDS - 40  # mask acted
    assert requests[1]["expand_calls"] == requests[2]["expand_calls"] == ["toolu_x0001"]  # shown again
    assert report["expand_rounds"] == 1 and report["not_expandable"] == 0
    answers = report["answers"]
    assert len(answers) == 2 and all(a["status"] == 200 for a in answers)
    assert all(a["headers"]["x-compaction-strategies"] == "minify,mask,window" for a in answers)
    assert not any("x-compaction-fallback" in a["headers"] for a in answers)
