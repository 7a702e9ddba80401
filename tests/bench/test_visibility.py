"""What a request needs to see: the values its answer reuses and the lines it quotes (bench.compaction.visibility)."""

from __future__ import annotations

import json

from bench.compaction.corpora import Conversation
from bench.compaction.visibility import MIN_QUOTE_CHARS, conversation_needs

LINE = "    return self._fields[name].deserialize(value, attr, data)"  # a line the model read, then quoted
SHORT = "x = 1  # short"


def call(id: str, arguments: dict[str, str]) -> dict[str, object]:
    return {"id": id, "type": "function", "function": {"name": "bash", "arguments": json.dumps(arguments)}}


def session(answer: dict[str, object]) -> list[dict[str, object]]:
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": None, "tool_calls": [call("a", {"command": "cat fields.py"})]},
        {"role": "tool", "tool_call_id": "a", "content": f"def load(self):\n{LINE}\n{SHORT}\n"},
        {"role": "user", "content": "Go on."},
        answer,
    ]


def needed(answer: dict[str, object]) -> tuple[str, ...]:
    return needed_of(session(answer))


def test_a_line_quoted_in_the_next_calls_arguments_is_needed() -> None:
    edit = call("b", {"command": "edit", "old": f"{LINE}\n{SHORT}", "new": "    return None"})
    assert LINE.strip() in needed({"role": "assistant", "content": None, "tool_calls": [edit]})


def test_a_line_quoted_in_the_next_text_is_needed() -> None:
    assert needed({"role": "assistant", "content": f"The bug is here:\n{LINE}\nso I will change it."}) == (
        LINE.strip(),
    )


def test_short_lines_and_lines_read_nowhere_before_are_not_quotes() -> None:
    assert len(SHORT) < MIN_QUOTE_CHARS
    fresh = "    raise ValidationError('this line was never read before')"
    assert needed({"role": "assistant", "content": f"{SHORT}\n{fresh}"}) == ()


def test_a_line_also_in_a_message_that_is_always_kept_is_not_needed() -> None:
    # The first user message is pinned: a quote of it is always visible, so never a read behind a stub, even where an
    # elidable result holds it too.
    asked = "Fix the bug in fields.py: load() drops the attribute name."
    messages = session({"role": "assistant", "content": f"As asked:\n{asked}"})
    messages[1] = {"role": "user", "content": asked}
    messages[3] = {**messages[3], "content": f"{messages[3]['content']}# {asked}\n"}
    assert conversation_needs(Conversation("c", messages), [len(messages) - 1]) == {}
    messages[1] = {"role": "user", "content": "Fix the bug."}
    assert asked in needed_of(messages)


def needed_of(messages: list[dict[str, object]]) -> tuple[str, ...]:
    needs = conversation_needs(Conversation("c", messages), [len(messages) - 1])
    return needs[len(messages) - 1].values if needs else ()
