from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import Context, ModelLimits, TokenCounter
from strategies.invariants import compaction_problems, pairing_problems
from strategies.layout import gather, pinned_units, split_units
from strategies.messages import Message
from strategies.window import Window, WindowParams
from tests.factories import agent_loop, call, calls, client_requests, output, qa_chat, result, system, user
from tests.strategies.generators import conversations, model_limits
from tests.strategies.harness import RecordingContext, apply, expected_budget, expected_total, keeps_the_invariants


def window(messages: list[Message], ctx: Context, **params: Any) -> list[Message]:
    return apply(Window(WindowParams(**params)), messages, ctx)


def replay(conversation: list[Message], counter: TokenCounter, **params: Any) -> list[tuple[list[Message], Any]]:
    """Each request's compacted messages with what window reported."""
    outs = []
    for request in client_requests(conversation):
        ctx = RecordingContext(model="gpt-4o", tokens=counter)
        outs.append((window(request, ctx, **params), dict(ctx.details)))
    return outs


def dumps(messages: list[Message]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def jumps(outs: list[tuple[list[Message], Any]]) -> list[int]:
    """Requests whose compacted messages do not start with the previous request's, byte for byte."""
    return [n for n in range(1, len(outs)) if dumps(outs[n][0][: len(outs[n - 1][0])]) != dumps(outs[n - 1][0])]


def test_a_conversation_within_budget_is_forwarded_unchanged(ctx: Context) -> None:
    messages = qa_chat(10)
    assert window(messages, ctx, budget=10 * 28) == messages
    assert ctx.details == {"budget": 280, "kept_units": 9, "cut_units": 0, "cuts": 0}


def test_over_budget_the_oldest_pairs_are_cut_down_to_the_low_water_mark(ctx: Context) -> None:
    messages = qa_chat(12)  # replayed: pairs 1..11 and question 12; pair 0 is pinned with the system prompt
    # Question 11 takes the kept part to 294 > 280 tokens: six pairs go (126 <= 140 left), then 5 pairs + q12.
    assert window(messages, ctx, budget=280) == messages[:3] + messages[15:]
    assert ctx.details == {"budget": 280, "kept_units": 5, "cut_units": 6, "cuts": 1}
    # low_water=1 is a sliding window: one pair goes each time, as few as needed.
    assert window(messages, ctx, budget=280, low_water=1) == messages[:3] + messages[7:]
    assert ctx.details["cuts"] == 2


def test_an_agent_loop_with_one_user_message_keeps_the_task_and_the_newest_tool_calls(ctx: Context) -> None:
    messages = agent_loop(30, 400)
    unit = ctx.count_message(messages[2]) + ctx.count_message(messages[3])
    out = window(messages, ctx, budget=10 * unit)
    assert out[:2] == messages[:2]
    assert out[2:] == messages[len(messages) - len(out) + 2 :]
    assert 5 <= (len(out) - 2) // 2 <= 10
    assert pairing_problems(out) == []


def test_a_call_is_cut_with_all_its_results(ctx: Context) -> None:
    messages = [system("s"), user("go"), calls("a", "b"), result("a", output(0, 800)), result("b", output(1, 800))]
    messages += [call("c"), result("c", "ok")]
    budget = ctx.count_message(messages[2]) + ctx.count_message(messages[3]) + 10
    out = window(messages, ctx, budget=budget)
    assert out == messages[:2] + messages[-2:]
    assert pairing_problems(out) == []


def test_the_last_question_is_forwarded_even_when_the_work_after_it_outgrew_the_budget(ctx: Context) -> None:
    messages = [system("s"), user("Fix the test."), call("a"), result("a", "ok"), user("Now the docs.")]
    messages += [m for i in range(10) for m in (call(f"d{i}"), result(f"d{i}", output(i, 400)))]
    out = window(messages, ctx, budget=400)
    assert out[:2] == messages[:2] and out[2] == user("Now the docs.")
    assert call("a") not in out and len(out) < len(messages)
    assert compaction_problems(messages, out) == []


def test_a_growing_chat_keeps_its_compacted_prefix_until_the_cut_jumps(counter: TokenCounter) -> None:
    outs = replay(qa_chat(60), counter, budget=280)  # 61 requests, the window holds 10 pairs
    assert len(outs) == 61
    # The window fills at the 11th request, then every 6th request cuts back to 5 pairs: 9 jumps in 61.
    assert jumps(outs) == [11, 17, 23, 29, 35, 41, 47, 53, 59]
    # Exactly the requests whose replay cut once more.
    assert [n for n in range(1, 61) if outs[n][1]["cuts"] > outs[n - 1][1]["cuts"]] == jumps(outs)
    # Without hysteresis the prefix moves with nearly every request.
    assert len(jumps(replay(qa_chat(60), counter, budget=280, low_water=1))) == 50


def test_a_growing_agent_loop_keeps_its_compacted_prefix_until_the_cut_jumps(counter: TokenCounter) -> None:
    outs = replay(agent_loop(100, 400), counter, budget=3000)
    assert len(outs) == 101
    assert len(jumps(outs)) == 10
    assert len(jumps(replay(agent_loop(100, 400), counter, budget=3000, low_water=1))) == 84


def test_stateless_the_same_input_gives_the_same_bytes(counter: TokenCounter) -> None:
    messages = agent_loop(40, 300)
    snapshot = copy.deepcopy(messages)
    first = window(messages, RecordingContext(model="gpt-4o", tokens=counter), budget=2000)
    second = window(snapshot, Context(model="gpt-4o", tokens=TokenCounter()), budget=2000)
    assert dumps(first) == dumps(second)
    assert dumps(messages) == dumps(snapshot)


def test_the_default_budget_leaves_room_for_tools_pinned_messages_and_the_question(counter: TokenCounter) -> None:
    limits = ModelLimits(context_window=10_000, max_output=1_000)
    ctx = RecordingContext(model="gpt-4o", tokens=counter, limits=limits)
    # Total 10000 - 1000 - 200 (2%); the question is under the allowance of 500 (5%), which is held back instead.
    steady = ctx.count_request(qa_chat(400)[:3])  # system and the first pair
    for pairs in (100, 400, 401):
        out = window(qa_chat(pairs), ctx)
        assert ctx.details["budget"] == 8800 - steady - 500
        assert ctx.count_request(out) <= 8800 and ctx.details["overflow"] is False
    # A question over the allowance takes its own size from the budget.
    long_question = [*qa_chat(400)[:-1], user(output(0, 4000))]
    window(long_question, ctx)
    assert ctx.details["budget"] == 8800 - steady - ctx.count_message(long_question[-1])


def test_pinned_messages_over_the_default_total_report_overflow(counter: TokenCounter) -> None:
    ctx = RecordingContext(model="gpt-4o", tokens=counter, limits=ModelLimits(context_window=1000, max_output=100))
    messages = [system(output(0, 5000)), user("go"), call("a"), result("a", "A"), user("?")]
    assert window(messages, ctx) == [messages[0], user("go"), user("?")]
    assert ctx.details["overflow"] is True and ctx.details["budget"] == 0


examples = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
params = st.fixed_dictionaries(
    {},
    optional={
        "budget": st.one_of(st.integers(0, 300), st.integers(0, 5000)),
        "low_water": st.sampled_from([0.1, 0.5, 0.5, 0.9, 1.0]),
    },
)


@examples
@given(conversations(), params, model_limits)
def test_properties(
    counter: TokenCounter, messages: list[Message], params: dict[str, Any], limits: ModelLimits
) -> None:
    ctx = RecordingContext(model="gpt-4o", tokens=counter, limits=limits)
    out = keeps_the_invariants(lambda m: window(m, ctx, **params), messages)

    # The budget, the total and the counts worked out here, not taken from what window reports.
    budget = params["budget"] if "budget" in params else expected_budget(messages, limits, counter, "gpt-4o")
    assert ctx.details["budget"] == budget
    units = split_units(messages)
    pinned = counter.count_messages(gather(messages, units, pinned_units(messages, units)), "gpt-4o")
    assert counter.count_messages(out, "gpt-4o") - pinned <= budget  # the kept non-pinned units
    if "budget" not in params:
        total = expected_total(limits, {})
        assert ctx.details["overflow"] is (pinned > total)
        if pinned <= total:
            assert counter.count_messages(out, "gpt-4o") <= total


def question_unit(messages: list[Message]) -> list[Message]:
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    unit = next(u for u in split_units(messages) if last in u.indices)
    return [messages[i] for i in unit.indices]


@examples
@given(conversations(), st.integers(0, 3000), st.sampled_from([0.1, 0.5, 0.5, 0.9, 1.0]))
def test_consecutive_requests_share_the_compacted_prefix_until_a_cut(
    counter: TokenCounter, conversation: list[Message], budget: int, low_water: float
) -> None:
    sent = client_requests(conversation)
    outs = replay(conversation, counter, budget=budget, low_water=low_water)
    for n in range(1, len(outs)):
        (before, details_before), (after, details) = outs[n - 1], outs[n]
        assert details["cuts"] >= details_before["cuts"]
        if details["cuts"] > details_before["cuts"]:
            continue  # the cut jumped: a new prefix starts here
        # The one other change: the previous question, which the replay had cut, is pinned no more and goes.
        question = question_unit(sent[n - 1])
        if not any(m is q for m in after for q in question):
            before = [m for m in before if not any(m is q for q in question)]
        assert dumps(after[: len(before)]) == dumps(before)
