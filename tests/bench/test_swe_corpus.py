"""scripts/convert_swe_traj.py and the swe corpus: SWE-agent's two .traj shapes become valid tool-calling
conversations, nothing the model wrote or read is lost, and a shipped sample keeps its licence beside it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.compaction.corpora import swe
from strategies.invariants import pairing_problems

ROOT = Path(__file__).resolve().parents[2]
THOUGHT = "Let's look at the file first."
COMMAND = "cat <<'EOF' > fix.py\nprint('fixed')\nEOF"


def function_calling() -> dict[str, Any]:
    # SWE-agent 1.x: the call list and the ids answered as Python reprs, as some versions store them.
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    return {
        "history": [
            {"role": "system", "content": "You are a programmer.", "message_type": "system_prompt"},
            {"role": "user", "content": [{"type": "text", "text": "Fix the issue."}]},
            {"role": "assistant", "content": "Listing.", "tool_calls": repr([call])},
            {"role": "tool", "content": "setup.py\nsrc", "tool_call_ids": repr(["call_1"])},
            {"role": "assistant", "content": "Done.", "tool_calls": [{**call, "id": "call_2"}]},
            {"role": "tool", "content": "ok", "tool_call_ids": ["call_2"]},
        ],
        "replay_config": json.dumps({"agent": {"model": {"name": "gpt-4o"}}}),
    }


def text_actions() -> dict[str, Any]:
    # SWE-agent 0.x: a thought and one fenced command; the next user message is its output.
    return {
        "history": [
            {"role": "system", "content": "You are a programmer."},
            {"role": "user", "content": "Fix the issue."},
            {"role": "assistant", "content": f"{THOUGHT}\n\n```\n{COMMAND}\n```\n"},
            {"role": "user", "content": "(Open file: fix.py)\nbash-$"},
            {"role": "assistant", "content": "It works.\n\n```\nsubmit\n```"},
            {"role": "user", "content": "diff --git a/fix.py b/fix.py"},
        ]
    }


def write(folder: Path, name: str, data: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data))


def test_both_traj_shapes_convert_to_valid_tool_calling(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write(runs / "gpt-4o__fc", "a.traj", function_calling())
    write(runs / "gpt4__text", "b.traj", text_actions())
    write(runs / "gpt4__copy", "b.traj", text_actions())  # the same history twice: kept once
    by_hand = text_actions()
    by_hand["history"][1] = {"role": "user", "content": "A demonstration."}
    write(runs / "human_thought__demo", "c.traj", by_hand)  # written by a person: left out
    out = tmp_path / "swe.json.gz"
    ran = subprocess.run(
        [sys.executable, "scripts/convert_swe_traj.py", "--repo", "o/n", "--out", str(out), str(runs)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "'duplicate': 1" in ran.stderr and "'written by a person': 1" in ran.stderr, ran.stderr
    corpus = swe.load(path=out)
    assert corpus.skipped is None and len(corpus.conversations) == 2 and corpus.title == "SWE-agent runs (real)"
    assert "gpt-4o 1, gpt4 1" in corpus.description and "1 of them text actions" in corpus.description
    for conversation in corpus.conversations:
        assert pairing_problems(conversation.messages) == [], conversation.id
        for message in conversation.messages:
            for call in message.get("tool_calls") or []:
                json.loads(call["function"]["arguments"])
    native, converted = (c.messages for c in corpus.conversations)
    assert native[1] == {"role": "user", "content": "Fix the issue."}
    assert [m.get("tool_call_id") for m in native if m["role"] == "tool"] == ["call_1", "call_2"]
    assert native[2]["tool_calls"][0]["function"] == {"name": "bash", "arguments": '{"command": "ls"}'}
    # The thought stays the assistant's text, the command (heredoc and all) its call, the output its result.
    assert converted[2]["content"] == THOUGHT
    assert json.loads(converted[2]["tool_calls"][0]["function"]["arguments"]) == {"command": COMMAND}
    assert converted[3] == {
        "role": "tool",
        "tool_call_id": converted[2]["tool_calls"][0]["id"],
        "content": "(Open file: fix.py)\nbash-$",
    }
    assert [m["role"] for m in converted] == ["system", "user", "assistant", "tool", "assistant", "tool"]


def test_missing_data_is_skipped_with_where_it_looked(tmp_path: Path) -> None:
    corpus = swe.load(path=tmp_path / "none.json.gz")
    assert corpus.skipped is not None and "none.json.gz not found" in corpus.skipped
