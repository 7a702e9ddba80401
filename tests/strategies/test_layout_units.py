from __future__ import annotations

from hypothesis import given, settings

from strategies.conversation import find_pairs
from strategies.invariants import pairing_problems
from strategies.layout import Unit, gather, pinned_units, split_units
from strategies.messages import Message
from tests.factories import assistant, call, calls, legacy_call, legacy_result, result, system, user
from tests.strategies.generators import conversations


def test_a_user_message_and_its_text_reply_are_one_unit() -> None:
    messages = [system("s"), user("q1"), assistant("a1"), user("q2")]
    assert split_units(messages) == [Unit((0,)), Unit((1, 2)), Unit((3,))]


def test_a_call_and_all_its_results_are_one_unit() -> None:
    messages = [user("go"), calls("a", "b"), result("a", "1"), result("b", "2"), call("c"), result("c", "3")]
    assert split_units(messages) == [Unit((0,)), Unit((1, 2, 3)), Unit((4, 5))]


def test_a_user_message_followed_by_a_tool_call_stands_alone() -> None:
    messages = [user("go"), call("a"), result("a", "1"), assistant("done")]
    assert split_units(messages) == [Unit((0,)), Unit((1, 2)), Unit((3,))]


def test_legacy_function_pairs_and_orphans() -> None:
    messages = [user("go"), legacy_call("run", {}), legacy_result("run", "ok"), result("ghost", "orphan")]
    assert split_units(messages) == [Unit((0,)), Unit((1, 2)), Unit((3,))]


def test_pinned_units_are_system_first_and_last_user() -> None:
    messages = [system("s"), user("task"), assistant("ok"), call("a"), result("a", "1"), user("more"), assistant("x")]
    units = split_units(messages)
    assert pinned_units(messages, units) == {0, 1, 3}
    assert gather(messages, units, {3, 0}) == [messages[0], messages[5], messages[6]]


def test_every_message_is_in_exactly_one_unit() -> None:
    messages = [system("s"), user("q"), calls("a", "b"), result("b", "2"), result("a", "1"), user("q2"), assistant("a")]
    indices = [i for unit in split_units(messages) for i in unit.indices]
    assert sorted(indices) == list(range(len(messages)))


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_units_partition_any_conversation_and_keep_pairs_together(messages: list[Message]) -> None:
    units = split_units(messages)
    assert sorted(i for unit in units for i in unit.indices) == list(range(len(messages)))
    unit_of = {i: n for n, unit in enumerate(units) for i in unit.indices}
    assert all(unit_of[p.call_index] == unit_of[p.result_index] for p in find_pairs(messages))
    # Keeping any set of whole units leaves a valid conversation.
    keep = set(range(0, len(units), 2)) | pinned_units(messages, units)
    assert pairing_problems(gather(messages, units, keep)) == []
