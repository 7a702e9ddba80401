from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import Context, ModelLimits, TokenCounter
from strategies.invariants import pairing_problems
from strategies.layout import gather, pinned_units, split_units
from strategies.messages import Message
from strategies.middle_out import MiddleOut, MiddleOutParams
from tests.factories import CUT_ALONE, agent_loop, assistant, call, calls, output, qa_chat, result, system, user
from tests.strategies.generators import conversations, model_limits
from tests.strategies.harness import RecordingContext, apply, expected_total, keeps_the_invariants


def middle_out(messages: list[Message], ctx: Context, **params: Any) -> list[Message]:
    return apply(MiddleOut(MiddleOutParams(**{**CUT_ALONE, **params})), messages, ctx)


def test_a_request_that_fits_is_forwarded_unchanged(ctx: Context) -> None:
    messages = agent_loop(10, 500)
    assert middle_out(messages, ctx) == messages
    assert ctx.details == {"total": 128_000 - 16_384 - 2_560, "dropped_units": 0, "overflow": False}


def test_tool_calls_go_from_the_middle_and_the_start_and_end_stay(ctx: Context) -> None:
    messages = agent_loop(10, 500)  # system, task, then call_0..call_9 with their results
    expected = messages[:2] + messages[2:8] + messages[16:]  # call_0..call_2 and call_7..call_9
    assert middle_out(messages, ctx, total=ctx.count_request(expected)) == expected
    assert ctx.details["dropped_units"] == 4


def test_chat_pairs_go_whole_and_the_system_first_pair_and_question_stay(ctx: Context) -> None:
    messages = qa_chat(9)
    expected = messages[:9] + messages[13:]  # pairs 4 and 5, the two in the middle, go
    out = middle_out(messages, ctx, total=ctx.count_request(expected))
    assert out == expected
    assert out[:3] == messages[:3] and out[-1] == messages[-1]


def test_the_message_limit_keeps_about_half_from_the_start_and_half_from_the_end(ctx: Context) -> None:
    messages = agent_loop(10, 100)  # 22 messages
    out = middle_out(messages, ctx, max_messages=12)
    assert out == messages[:6] + messages[16:]  # system, task, call_0, call_1 | call_7, call_8, call_9
    # An odd limit cannot split a call from its result: one pair more goes.
    assert middle_out(messages, ctx, max_messages=11) == messages[:6] + messages[18:]


def test_parallel_calls_go_with_all_their_results(ctx: Context) -> None:
    messages = [user("go"), call("a"), result("a", "A")]
    messages += [calls("b", "c"), result("b", output(0, 300)), result("c", output(1, 300))]
    messages += [assistant("Done."), user("thanks")]
    out = middle_out(messages, ctx, max_messages=7)
    assert out == [user("go"), call("a"), result("a", "A"), assistant("Done."), user("thanks")]
    assert pairing_problems(out) == []


def test_pinned_messages_over_budget_or_limit_are_forwarded_alone_with_overflow(ctx: Context) -> None:
    messages = [system(output(0, 4000)), user("go"), call("a"), result("a", "A"), user("?")]
    assert middle_out(messages, ctx, total=100) == [messages[0], user("go"), user("?")]
    assert ctx.details["overflow"] is True
    assert middle_out(messages, ctx, max_messages=2) == [messages[0], user("go"), user("?")]
    assert ctx.details == {"total": 128_000 - 16_384 - 2_560, "dropped_units": 1, "overflow": True}


def test_the_default_budget_is_fits_default_total(counter: TokenCounter) -> None:
    limits = ModelLimits(context_window=2000, max_output=1000)
    ctx = RecordingContext(model="gpt-4o", tokens=counter, limits=limits, request={"max_completion_tokens": 300})
    messages = qa_chat(100)
    out = middle_out(messages, ctx)
    assert ctx.details["total"] == 2000 - 300 - 40
    assert ctx.count_request(out) <= 1660
    assert out[:3] == messages[:3] and out[-1] == messages[-1]
    head = next(i for i, (a, b) in enumerate(zip(out, messages, strict=False)) if a is not b)
    assert abs(head - (len(out) - head)) <= 3  # about as many messages before the hole as after it


def test_the_input_is_not_mutated_and_the_output_is_deterministic(ctx: Context) -> None:
    messages = agent_loop(10, 800)
    snapshot = copy.deepcopy(messages)
    out = middle_out(messages, ctx, total=2000, max_messages=9)
    assert json.dumps(messages) == json.dumps(snapshot)
    assert json.dumps(out) == json.dumps(middle_out(snapshot, ctx, total=2000, max_messages=9))


examples = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
params = st.fixed_dictionaries(
    {},
    optional={"total": st.one_of(st.integers(0, 300), st.integers(0, 5000)), "max_messages": st.integers(1, 30)},
)


@examples
@given(conversations(), params, model_limits)
def test_properties(
    counter: TokenCounter, messages: list[Message], params: dict[str, Any], limits: ModelLimits
) -> None:
    ctx = RecordingContext(model="gpt-4o", tokens=counter, limits=limits)
    out = keeps_the_invariants(lambda m: middle_out(m, ctx, **params), messages)

    # The total and the counts worked out here, not taken from what middle_out reports.
    budget = params["total"] if "total" in params else expected_total(limits, {})
    limit = params.get("max_messages", len(messages))
    assert ctx.details["total"] == budget
    units = split_units(messages)
    pinned = gather(messages, units, pinned_units(messages, units))
    if counter.count_messages(pinned, "gpt-4o") <= budget and len(pinned) <= limit:
        assert counter.count_messages(out, "gpt-4o") <= budget
        assert len(out) <= limit
        assert ctx.details["overflow"] is False
    else:
        assert out == pinned
        assert ctx.details["overflow"] is True
