"""Reading and rewriting messages (strategies.conversation): their text, their calls and the results."""

from __future__ import annotations

import copy

import pytest

from strategies.conversation import (
    ToolPair,
    call_arguments,
    find_pairs,
    remove_pairs,
    text_of,
    with_arguments,
    with_text,
)
from tests.factories import (
    assistant,
    call,
    calls,
    legacy_call,
    legacy_result,
    parts,
    result,
    tool_call,
    user,
)


def test_find_pairs_in_result_order_with_parallel_and_legacy_calls() -> None:
    messages = [
        user("go"),
        calls("a", "b"),
        result("b", "B"),
        result("a", "A"),
        legacy_call("ls", {"dir": "."}),
        legacy_result("ls", "x.py"),
    ]
    assert find_pairs(messages) == [ToolPair(1, "b", 2), ToolPair(1, "a", 3), ToolPair(4, None, 5)]


def test_find_pairs_leaves_out_unanswered_calls_and_orphan_results() -> None:
    messages = [user("go"), calls("a", "b"), result("a", "A"), result("zzz", "orphan"), legacy_result("ls", "x")]
    assert find_pairs(messages) == [ToolPair(1, "a", 2)]
    legacy = [user("go"), legacy_call("ls", {}), legacy_result("ls", "x"), legacy_result("ls", "again")]
    assert find_pairs(legacy) == [ToolPair(1, None, 2)]


def test_a_reused_id_pairs_with_the_newest_call() -> None:
    messages = [user("go"), call("call_0"), result("call_0", "1"), call("call_0"), result("call_0", "2")]
    assert find_pairs(messages) == [ToolPair(1, "call_0", 2), ToolPair(3, "call_0", 4)]
    unanswered_first = [user("go"), call("call_0"), user("never mind"), call("call_0"), result("call_0", "2")]
    assert find_pairs(unanswered_first) == [ToolPair(3, "call_0", 4)]


def test_remove_pairs_drops_call_and_result_and_the_emptied_assistant_message() -> None:
    messages = [user("go"), call("a"), result("a", "A"), call("b"), result("b", "B")]
    assert remove_pairs(messages, [ToolPair(1, "a", 2)]) == [user("go"), call("b"), result("b", "B")]


def test_remove_pairs_keeps_the_assistant_text_and_never_leaves_empty_tool_calls() -> None:
    with_text = {"role": "assistant", "content": "Let me look.", "tool_calls": [tool_call("a")]}
    messages = [user("go"), with_text, result("a", "A")]
    assert remove_pairs(messages, [ToolPair(1, "a", 2)]) == [user("go"), assistant("Let me look.")]


def test_remove_pairs_removes_only_the_dropped_parallel_calls() -> None:
    messages = [user("go"), calls("a", "b", "c"), result("a", "A"), result("b", "B"), result("c", "C")]
    snapshot = copy.deepcopy(messages)
    out = remove_pairs(messages, [ToolPair(1, "a", 2), ToolPair(1, "c", 4)])
    assert out == [user("go"), calls("b"), result("b", "B")]
    assert messages == snapshot


def test_remove_pairs_of_a_legacy_function_call() -> None:
    messages = [user("go"), legacy_call("ls", {}), legacy_result("ls", "x.py"), user("next")]
    assert remove_pairs(messages, [ToolPair(1, None, 2)]) == [user("go"), user("next")]


def test_call_arguments_and_with_arguments_address_one_call_by_id() -> None:
    message = calls("a", "b")
    changed = with_arguments(message, {"b": "{}"})
    assert [call_arguments(changed, i) for i in ("a", "b")] == ['{"path": "a.py"}', "{}"]
    assert call_arguments(message, "b") == '{"path": "b.py"}'  # the original is untouched
    legacy = with_arguments(legacy_call("ls", {"dir": "."}), {None: "{}"})
    assert call_arguments(legacy, None) == "{}"


def test_a_call_whose_id_is_no_string_is_neither_removed_nor_rewritten() -> None:
    # A client's list there is unhashable (a TypeError, once); a call with no id is not the function_call (None).
    odd, no_id = {**tool_call("x"), "id": ["x"]}, {k: v for k, v in tool_call("y").items() if k != "id"}
    message = {**legacy_call("ls", {}), "tool_calls": [tool_call("a"), odd, no_id]}
    messages = [user("go"), message, result("a", "A"), legacy_result("ls", "x.py")]
    out = remove_pairs(messages, [ToolPair(1, "a", 2), ToolPair(1, None, 3)])
    assert out == [user("go"), {"role": "assistant", "content": None, "tool_calls": [odd, no_id]}]
    changed = with_arguments(message, {"a": "{}", None: "{}"})
    assert changed["tool_calls"] == [{**tool_call("a"), "function": {"name": "read", "arguments": "{}"}}, odd, no_id]


IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ("plain", "plain"),
        ([{"type": "text", "text": "a"}, IMAGE, {"type": "text", "text": "b"}], "ab"),
        ([{"type": "text", "text": None}, "stray", {"type": "text"}], ""),
        (None, ""),
    ],
)
def test_text_of_reads_strings_and_text_parts(content: object, text: str) -> None:
    assert text_of(content) == text


def test_with_text_keeps_the_shape_and_the_non_text_parts() -> None:
    assert with_text("old", "new") == "new"
    assert with_text(parts("old"), "new") == parts("new")
    content = [{"type": "text", "text": "a"}, IMAGE, {"type": "text", "text": "b"}]
    assert with_text(content, "new") == [{"type": "text", "text": "new"}, IMAGE]
    assert content[0] == {"type": "text", "text": "a"}  # not mutated


def test_with_text_keeps_the_first_text_parts_other_keys_and_place() -> None:
    cached = {"type": "text", "text": "old", "cache_control": {"type": "ephemeral"}}
    assert with_text([IMAGE, cached, parts("more")[0]], "new") == [IMAGE, {**cached, "text": "new"}]
    assert with_text([IMAGE], "new") == [{"type": "text", "text": "new"}, IMAGE]
