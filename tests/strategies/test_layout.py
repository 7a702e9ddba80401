"""The layout read at a prefix (strategies.layout): the same cuts as rebuilding the prefix's units from scratch,
the way fit and middle_out worked before, priced exactly as the request counts.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import Context, TokenCounter
from strategies.conversation import find_pairs
from strategies.epochs import request_ends
from strategies.invariants import pairing_problems
from strategies.layout import Layout, Unit, fit_cut, gather, pinned_units, split_units
from strategies.messages import Message
from strategies.middle_out import middle_cut
from tests.factories import (
    agent_loop,
    assistant,
    call,
    calls,
    legacy_call,
    legacy_result,
    qa_chat,
    result,
    system,
    user,
)
from tests.strategies.generators import conversations
from tests.strategies.harness import RecordingContext


def priced(messages: list[Message], ctx: Context) -> tuple[list[list[int]], set[int], list[int]]:
    units = split_units(messages)
    tokens = [sum(ctx.count_message(messages[i]) for i in unit.indices) for unit in units]
    return [list(u.indices) for u in units], pinned_units(messages, units), tokens


def reference_fit(messages: list[Message], ctx: Context, total: int) -> list[Message]:
    """fit as it was: the prefix's units built anew, pinned first, then the newest that fit."""
    units, pinned, tokens = priced(messages, ctx)
    keep = set(pinned)
    cost = ctx.count_request([]) + sum(tokens[p] for p in keep)
    if cost <= total:
        for position in reversed([p for p in range(len(units)) if p not in pinned]):
            if cost + tokens[position] > total:
                break
            keep.add(position)
            cost += tokens[position]
    return gather(messages, split_units(messages), keep)


def reference_middle_out(messages: list[Message], ctx: Context, budget: int, limit: int) -> list[Message]:
    """middle_out as it was: drop the removable unit nearest the middle until the request fits."""
    units, pinned, tokens = priced(messages, ctx)
    keep = set(range(len(units)))
    cost, count = ctx.count_request(messages), len(messages)
    removable = [p for p in range(len(units)) if p not in pinned]
    if removable:
        middle = units[removable[0]][0] + units[removable[-1]][-1]
        for position in sorted(removable, key=lambda p: (abs(units[p][0] + units[p][-1] - middle), units[p][0])):
            if cost <= budget and count <= limit:
                break
            keep.discard(position)
            cost -= tokens[position]
            count -= len(units[position])
    return gather(messages, split_units(messages), keep)


def test_a_prefix_ending_at_a_question_keeps_it_pinned_without_its_later_answer(ctx: Context) -> None:
    messages = qa_chat(4)  # system, then question/answer pairs, then the last question
    prefix = Layout.of(messages, ctx).prefix(4)  # system, pair 0, question 1: its answer lies past the end
    cut = fit_cut(prefix, total=0)
    assert cut.overflow and prefix.gather(cut.lo, cut.hi) == messages[:4]
    assert prefix.pinned_tokens == ctx.count_request(messages[:4])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.floats(0, 1.2), st.data())
def test_every_prefix_cuts_as_if_it_were_the_whole_request(
    counter: TokenCounter, conversation: list[Message], share: float, data: st.DataObject
) -> None:
    ctx = RecordingContext(model="gpt-4o", tokens=counter)
    layout = Layout.of(conversation, ctx)
    for end in request_ends(conversation):
        prefix_messages = conversation[:end]
        total = int(ctx.count_request(prefix_messages) * share)
        prefix = layout.prefix(end)
        cut = fit_cut(prefix, total)
        kept = prefix.gather(cut.lo, cut.hi)
        assert kept == reference_fit(prefix_messages, ctx, total)
        assert (cut.tokens, cut.count) == (ctx.count_request(kept), len(kept))
        assert prefix.kept(cut.lo, cut.hi).tokens == cut.tokens
        limit = data.draw(st.integers(1, max(1, end)))
        middle = middle_cut(prefix, total, limit)
        kept = prefix.gather(middle.lo, middle.hi)
        assert kept == reference_middle_out(prefix_messages, ctx, total, limit)
        assert (middle.tokens, middle.count) == (ctx.count_request(kept), len(kept))


def test_a_floor_keeps_what_an_earlier_cut_dropped_out(ctx: Context) -> None:
    messages = agent_loop(10, 300)
    prefix = Layout.of(messages, ctx).prefix(len(messages))
    first = fit_cut(prefix, ctx.count_request(messages) // 2)
    # A roomier total would keep older units again, but not below the floor of the first cut.
    again = fit_cut(prefix, ctx.count_request(messages), floor=first.hi)
    assert prefix.gather(again.lo, again.hi) == prefix.gather(first.lo, first.hi)


def test_a_cut_costs_what_it_keeps_not_the_conversation(ctx: Context) -> None:
    # 20,000 one-line messages behind a few pinned ones: a cut to a small total visits a few units only.
    messages = [system("s"), user("task")]
    for i in range(10_000):
        messages += [assistant(f"a{i}"), user(f"u{i}")]
    layout = Layout.of(messages, ctx)
    visited: list[int] = []
    prefix = layout.prefix(len(messages))
    original = prefix.unit_tokens

    def counting(position: int) -> int:
        visited.append(position)
        return original(position)

    prefix.unit_tokens = counting  # type: ignore[method-assign]
    cut = fit_cut(prefix, total=200)
    assert cut.tokens <= 200 and len(visited) < 40


def test_results_answering_an_earlier_call_stay_in_its_unit(ctx: Context) -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in "ab"],
    }
    messages = [user("go"), call, result("a", "A" * 200), result("b", "B" * 200), user("next")]
    prefix = Layout.of(messages, ctx).prefix(3)  # the call and one of its two results
    assert prefix.unit_count(1) == 2 and prefix.unit_tokens(1) == sum(ctx.count_message(m) for m in messages[1:3])


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
