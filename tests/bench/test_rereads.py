"""What a real agent comes back to, by kind, age and supersession (bench.compaction.rereads)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.compaction.corpora import Conversation
from bench.compaction.rereads import kind, main, measure

READ = "    def deserialize(self, value, attr=None, data=None, **kwargs):"  # quoted later


def call(id: str, command: str) -> dict[str, object]:
    return {"id": id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}


def turn(id: str, command: str, output: str) -> list[dict[str, object]]:
    return [
        {"role": "assistant", "content": None, "tool_calls": [call(id, command)]},
        {"role": "tool", "tool_call_id": id, "content": output},
    ]


def session(*, again: bool) -> Conversation:
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug."},
        *turn("a", "cat fields.py", f"class Field:\n{READ}\n"),
        *turn("b", "pytest -q", "1 failed"),
        *turn("c", "cat fields.py" if again else "ls", "fields.py is unchanged since" if again else "fields.py"),
        *turn("d", "pytest -x", "1 failed"),
        {"role": "assistant", "content": f"Line to change:\n{READ}"},
    ]
    return Conversation("c", messages)


def test_a_quoted_result_is_counted_by_its_kind_and_age() -> None:
    out = measure([session(again=False)])
    assert out.results == {"bash: cat": 1, "bash: pytest": 2, "bash: ls": 1}
    assert out.reread == {"bash: cat": 1}
    assert out.ages == {(3, 5): 1}  # three results came after it
    assert out.superseded == 0
    assert out.requests_rereading == 1


def test_a_quoted_result_read_again_by_the_same_call_since_is_superseded() -> None:
    # The newest copy holding the line is the one read: here the first, the second cat's output lacks it.
    assert measure([session(again=True)]).superseded == 1


def test_kind_is_the_tool_and_the_first_word_of_a_command() -> None:
    assert kind("bash", json.dumps({"command": "  grep -rn x ."})) == "bash: grep"
    assert kind("get_user_details", json.dumps({"user_id": "u1"})) == "get_user_details"
    assert kind("bash", "not json") == "bash"


def test_the_command_prints_a_table_per_corpus_and_says_which_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["--swe-data", str(tmp_path / "absent.json.gz")])
    printed = capsys.readouterr().out
    assert "SWE-agent runs (real): skipped" in printed
    assert "#### tau-bench airline (real): 2454 requests" in printed
    assert "| `get_user_details` |" in printed
