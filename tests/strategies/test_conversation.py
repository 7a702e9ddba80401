"""Reading and rewriting messages (strategies.conversation): their text, their calls and the results."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from strategies.conversation import (
    CallIndex,
    ToolPair,
    call_arguments,
    call_name,
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
from tests.strategies.harness import ScannedCalls


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


def scanned_first_function(message: dict[str, Any], call_id: str | None) -> Any:
    """What a call lookup answers, written as the scan it replaces: the first call with the id."""
    if call_id is None:
        return message.get("function_call")
    return next((c.get("function") for c in message.get("tool_calls") or [] if c.get("id") == call_id), None)


def test_a_call_index_answers_as_a_scan_of_the_message_does() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            tool_call("a", "read", {"path": "a.py"}),
            tool_call("b", "grep", "not json"),
            tool_call("a", "write", {"path": "again.py"}),  # a repeated id: the first call answers
            {"id": "c", "type": "function", "function": {"name": 7, "arguments": {"not": "a string"}}},
            {"id": "d", "type": "function"},
            {"type": "function", "function": {"name": "no_id", "arguments": "{}"}},
        ],
        "function_call": {"name": "ls", "arguments": '{"dir": "."}'},
    }
    index = CallIndex()
    for call_id in ("a", "b", "c", "d", "zzz", None):
        function = scanned_first_function(message, call_id)
        name = function.get("name") if isinstance(function, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        assert index.name(message, call_id) == call_name(message, call_id) == (name if isinstance(name, str) else "")
        expected = arguments if isinstance(arguments, str) else None
        assert index.arguments(message, call_id) == call_arguments(message, call_id) == expected


def test_a_call_index_reads_each_message_once_whatever_its_parallel_calls() -> None:
    listed = ScannedCalls([tool_call(f"call_{i}") for i in range(2000)])
    message = {"role": "assistant", "content": None, "tool_calls": listed}
    index = CallIndex()
    names = [index.name(message, f"call_{i}") for i in range(2000)]
    arguments = [index.arguments(message, f"call_{i}") for i in range(2000)]
    assert names == ["read"] * 2000 and arguments[7] == '{"path": "call_7.py"}'
    assert listed.scans == 1
    for i in range(2000):
        index.rewritten(message, f"call_{i}", "{}")
    assert listed.scans == 2  # the calls with_arguments rewrites, by id: indexed once too


def test_a_call_index_tells_apart_messages_with_the_same_ids() -> None:
    first, second = calls("call_0"), {**call("call_0", "write"), "tool_calls": [tool_call("call_0", "write")]}
    index = CallIndex()
    assert [index.name(first, "call_0"), index.name(second, "call_0")] == ["read", "write"]


def test_rewritten_names_what_with_arguments_changes_for_an_id() -> None:
    message = {
        **calls("a", "b", "a"),
        "function_call": {"name": "ls", "arguments": '["."]'},
    }
    message["tool_calls"] += [{"id": None, "type": "function", "function": {"name": "x", "arguments": "[1]"}}]
    index = CallIndex()
    for call_id in ("a", "b", "zzz", None):
        new = with_arguments(message, {call_id: "{}"})
        changed = [(old, now) for old, now in zip(message["tool_calls"], new["tool_calls"], strict=True) if old != now]
        if new.get("function_call") != message.get("function_call"):
            changed.append((message["function_call"], new["function_call"]))
        assert index.rewritten(message, call_id, "{}") == changed


def test_with_arguments_leaves_calls_it_cannot_address_as_they_are() -> None:
    odd = {"role": "assistant", "content": None, "tool_calls": [{"id": ["a"], "function": {"arguments": "[]"}}]}
    assert with_arguments(odd, {"a": "{}"}) == odd  # an id that is no string: no key of any call
    not_a_list = {"role": "assistant", "content": None, "tool_calls": "abc", "function_call": {"arguments": "[]"}}
    assert with_arguments(not_a_list, {None: "{}"})["tool_calls"] == "abc"


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
