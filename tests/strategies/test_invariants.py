"""The property tests trust these checks, so each must catch what it claims to."""

from __future__ import annotations

from strategies.invariants import compaction_problems, pairing_problems, pinned_indices
from tests.factories import assistant, call, calls, legacy_call, legacy_result, result, system, user


def test_a_valid_conversation_has_no_problems() -> None:
    messages = [system("s"), user("u"), calls("a", "b"), result("a", "A"), result("b", "B"), assistant("ok")]
    messages += [legacy_call("ls", {}), legacy_result("ls", "x"), user("v")]
    assert pairing_problems(messages) == []


def test_pairing_problems_are_found() -> None:
    assert pairing_problems([user("u"), result("a", "A")]) == ["message 1: tool result 'a' answers no open call"]
    assert pairing_problems([user("u"), calls("a", "b"), result("a", "A"), user("v")]) == [
        "message 1: calls ['b'] have no result"
    ]
    assert pairing_problems([user("u"), call("a")]) == ["message 1: calls ['a'] have no result"]
    assert pairing_problems([{"role": "assistant", "content": "x", "tool_calls": []}]) == [
        "message 0: empty tool_calls"
    ]
    assert pairing_problems([{"role": "assistant", "content": None}]) == [
        "message 0: assistant message with no content and no calls"
    ]


def test_pinned_are_system_developer_first_and_last_user() -> None:
    messages = [system("s"), user("1"), assistant("a"), {"role": "developer", "content": "d"}, user("2"), user("3")]
    assert pinned_indices(messages) == [0, 1, 3, 5]


def test_compaction_problems_catch_a_changed_moved_or_dropped_pinned_message() -> None:
    before = [system("s"), user("task"), assistant("a"), user("last")]
    assert compaction_problems(before, [system("s"), user("task"), user("last")]) == []
    assert compaction_problems(before, [system("s"), user("TASK"), user("last")]) == [
        "pinned message 1 (user) changed, moved or dropped"
    ]
    assert compaction_problems(before, [user("task"), system("s"), user("last")]) != []
    assert compaction_problems(before, [system("s"), user("task")]) != []


def test_compaction_problems_catch_broken_pairing_only_if_it_was_valid_before() -> None:
    valid = [user("u"), call("a"), result("a", "A"), user("v")]
    assert compaction_problems(valid, [user("u"), result("a", "A"), user("v")]) != []
    orphan = [user("u"), result("a", "A"), user("v")]
    assert compaction_problems(orphan, orphan) == []
