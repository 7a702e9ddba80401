from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import Context, ModelLimits, ModelTable, TokenCounter
from strategies.fit import Fit, FitParams
from strategies.invariants import pairing_problems
from strategies.layout import gather, pinned_units, split_units
from strategies.messages import Message
from tests.factories import CUT_ALONE, agent_loop, assistant, call, calls, output, qa_chat, result, system, user
from tests.strategies.generators import conversations, model_limits
from tests.strategies.harness import RecordingContext, apply, expected_total, keeps_the_invariants


def fit(messages: list[Message], ctx: Context, **params: Any) -> list[Message]:
    return apply(Fit(FitParams(**{**CUT_ALONE, **params})), messages, ctx)


def context(counter: TokenCounter, window: int = 10_000, max_output: int = 1_000, **request: Any) -> Context:
    limits = ModelLimits(context_window=window, max_output=max_output)
    return RecordingContext(model="gpt-4o", tokens=counter, limits=limits, request=request)


def test_a_request_within_total_is_forwarded_unchanged(ctx: Context) -> None:
    messages = qa_chat(5)
    assert fit(messages, ctx, total=ctx.count_request(messages)) == messages
    assert ctx.details == {"total": ctx.count_request(messages), "kept_units": 4, "dropped_units": 0, "overflow": False}


def test_the_newest_whole_pairs_that_fit_stay_with_system_first_pair_and_question(ctx: Context) -> None:
    messages = qa_chat(10)
    expected = messages[:3] + messages[-7:]  # system, first pair, the newest three pairs, the question
    total = ctx.count_request(expected)
    assert fit(messages, ctx, total=total) == expected
    # One token less: a whole pair goes, never half of one.
    assert fit(messages, ctx, total=total - 1) == messages[:3] + messages[-5:]
    assert ctx.details["dropped_units"] == 7


def test_a_call_never_leaves_its_results(ctx: Context) -> None:
    messages = [system("s"), user("go"), calls("a", "b"), result("a", output(0, 400)), result("b", output(1, 400))]
    messages += [call("c"), result("c", "ok")]
    # Room for the last call and one of the two parallel results, but not both: the parallel unit goes whole.
    total = ctx.count_request(messages) - ctx.count_message(messages[3])
    out = fit(messages, ctx, total=total)
    assert out == messages[:2] + messages[-2:]
    assert pairing_problems(out) == []


def test_an_agent_loop_with_one_user_message_keeps_the_task_and_the_newest_tool_calls(ctx: Context) -> None:
    messages = agent_loop(20, 500)
    expected = messages[:2] + messages[-10:]
    assert fit(messages, ctx, total=ctx.count_request(expected)) == expected


def test_no_hole_the_oldest_small_unit_goes_when_a_bigger_newer_one_does_not_fit(ctx: Context) -> None:
    messages = [user("go"), call("a"), result("a", "tiny"), call("b"), result("b", output(1, 3000))]
    messages += [call("c"), result("c", "small"), user("next?")]
    # Room for everything but half of the big result: the tiny oldest unit would fit, but stays out.
    out = fit(messages, ctx, total=ctx.count_request(messages) - ctx.count_message(messages[4]) // 2)
    assert out == [user("go"), call("c"), result("c", "small"), user("next?")]


def test_tool_definitions_count_against_total(counter: TokenCounter) -> None:
    tools = [{"type": "function", "function": {"name": "read", "description": output(0, 200), "parameters": {}}}]
    messages = qa_chat(10)
    plain, with_tools = context(counter), context(counter, tools=tools)
    total = plain.count_request(messages)
    assert fit(messages, plain, total=total) == messages
    out = fit(messages, with_tools, total=total)
    assert len(out) < len(messages)
    assert with_tools.count_request(out) <= total
    assert with_tools.details["overflow"] is False


def test_pinned_messages_that_do_not_fit_are_forwarded_alone_with_overflow(ctx: Context) -> None:
    messages = [system(output(0, 4000)), user("go"), assistant("ok"), user("more"), assistant("done"), user("?")]
    out = fit(messages, ctx, total=100)
    assert out == [messages[0], user("go"), assistant("ok"), user("?")]
    assert ctx.details["overflow"] is True
    assert ctx.details["kept_units"] == 0


def test_the_default_total_comes_from_the_model_table_and_the_request(counter: TokenCounter) -> None:
    table = ModelTable.packaged()
    messages = [user("hi")]

    def total(model: str, **request: Any) -> int:
        ctx = RecordingContext(model=model, tokens=counter, limits=table.lookup(model), request=request)
        fit(messages, ctx)
        return int(ctx.details["total"])

    # gpt-4o: 128000 context, 16384 output; 2% of the context window (2560) is the safety margin.
    assert total("gpt-4o") == 128_000 - 16_384 - 2_560
    assert total("gpt-4o", max_tokens=1000) == 128_000 - 1000 - 2_560
    assert total("gpt-4o", max_tokens=1000, max_completion_tokens=500) == 128_000 - 500 - 2_560
    assert total("openai/gpt-4o", max_tokens=None) == 128_000 - 16_384 - 2_560
    # gpt-4 lists max_output = context_window (8192): the model's own maximum is capped at half the window...
    assert total("gpt-4") == 8192 - 4096 - 163
    # ... but what the request asks for is honoured.
    assert total("gpt-4", max_tokens=6000) == 8192 - 6000 - 163


def test_the_default_total_binds_and_reserve_overrides_the_output_reserve(counter: TokenCounter) -> None:
    messages = qa_chat(100)
    ctx = context(counter, window=2000, max_output=1000, max_tokens=300)
    out = fit(messages, ctx)
    assert ctx.details["total"] == 2000 - 300 - 40
    assert ctx.count_request(out) <= 1660 < ctx.count_request(messages[:3] + messages[len(messages) - len(out) + 1 :])
    fit(messages, ctx, reserve=0)
    assert ctx.details["total"] == 2000 - 40
    fit(messages, ctx, total=500, reserve=0)
    assert ctx.details["total"] == 500


def test_the_input_is_not_mutated_and_the_output_is_deterministic(ctx: Context) -> None:
    messages = agent_loop(10, 800)
    snapshot = copy.deepcopy(messages)
    out = fit(messages, ctx, total=2000)
    assert json.dumps(messages) == json.dumps(snapshot)
    assert json.dumps(out) == json.dumps(fit(snapshot, ctx, total=2000))


examples = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
params = st.fixed_dictionaries(
    {},
    optional={"total": st.one_of(st.integers(0, 300), st.integers(0, 5000)), "reserve": st.integers(0, 3000)},
)
requests = st.fixed_dictionaries({}, optional={"max_tokens": st.integers(1, 5000)})


@examples
@given(conversations(), params, model_limits, requests)
def test_properties(
    counter: TokenCounter,
    messages: list[Message],
    params: dict[str, Any],
    limits: ModelLimits,
    request: dict[str, Any],
) -> None:
    ctx = RecordingContext(model="gpt-4o", tokens=counter, limits=limits, request=request)
    out = keeps_the_invariants(lambda m: fit(m, ctx, **params), messages)

    # The total and the counts worked out here, not taken from what fit reports.
    total = params["total"] if "total" in params else expected_total(limits, request, params.get("reserve"))
    assert ctx.details["total"] == total
    units = split_units(messages)
    pinned = gather(messages, units, pinned_units(messages, units))
    if counter.count_messages(pinned, "gpt-4o") <= total:
        assert counter.count_messages(out, "gpt-4o") <= total
        assert ctx.details["overflow"] is False
    else:
        assert out == pinned
        assert ctx.details["overflow"] is True
