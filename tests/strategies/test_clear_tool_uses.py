from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from strategies import Context, Encodings, TokenCounter
from strategies.clear_tool_uses import ClearToolUses, ClearToolUsesParams
from strategies.conversation import (
    ToolPair,
    call_arguments,
    call_name,
    find_pairs,
    is_tool_result,
    text_of,
    with_arguments,
    with_message_text,
)
from strategies.invariants import pairing_problems
from strategies.markers import elided
from strategies.messages import Message
from tests.factories import (
    agent_loop,
    assistant,
    call,
    calls,
    legacy_call,
    legacy_result,
    output,
    parts,
    result,
    user,
)
from tests.strategies.generators import conversations
from tests.strategies.harness import (
    RecordingContext,
    apply,
    expand_hint,
    keeps_the_invariants,
    linear_in_parallel_calls,
    ref,
)


def clear(messages: list[Message], ctx: Context, **params: Any) -> list[Message]:
    return apply(ClearToolUses(ClearToolUsesParams(**params)), messages, ctx)


def cleared(name: str, text: str, arguments: str | None = None) -> str:
    """The placeholder format, written out independently of the strategy."""
    args = f'; its arguments too: {len(arguments):,} chars, ref="{ref(arguments)}"' if arguments is not None else ""
    return f"[{name} output elided: {len(text):,} chars; {expand_hint(text)} to see it{args}]"


def cleared_ids(messages: list[Message]) -> list[str]:
    results = [m for m in messages if m["role"] == "tool"]
    return [m["tool_call_id"] for m in results if " output elided: " in text_of(m["content"])]


def gain(ctx: Context, message: Message) -> int:
    """Tokens clearing one result saves."""
    return ctx.count_message(message) - ctx.count_message({**message, "content": cleared("read", message["content"])})


def test_nothing_is_touched_until_the_prompt_passes_the_trigger(ctx: Context) -> None:
    messages = agent_loop(6, 1000)
    out = clear(messages, ctx, trigger=ctx.count_request(messages))
    assert all(a is b for a, b in zip(out, messages, strict=True))
    assert ctx.details == {"cleared_tool_uses": 0, "cleared_tokens": 0}


def test_past_the_trigger_all_but_the_newest_keep_results_become_placeholders(ctx: Context) -> None:
    messages = agent_loop(6, 1000)
    out = clear(messages, ctx, trigger=ctx.count_request(messages) - 1)
    assert out[3] == {"role": "tool", "tool_call_id": "call_0", "content": cleared("read", output(0, 1000))}
    assert cleared_ids(out) == ["call_0", "call_1", "call_2"]
    assert out[:3] == messages[:3] and out[-6:] == messages[-6:]
    assert ctx.details["cleared_tool_uses"] == 3
    assert ctx.details["cleared_tokens"] == ctx.count(messages) - ctx.count(out) > 0


def test_keep_sets_how_many_tool_uses_stay_whole(ctx: Context) -> None:
    messages = agent_loop(5, 1000)
    assert cleared_ids(clear(messages, ctx, trigger=0, keep=0)) == [f"call_{i}" for i in range(5)]
    assert cleared_ids(clear(messages, ctx, trigger=0, keep=4)) == ["call_0"]
    assert clear(messages, ctx, trigger=0, keep=5) == messages


def test_the_trigger_counts_the_tool_definitions(counter: TokenCounter) -> None:
    messages = agent_loop(4, 1000)
    tool = {"type": "function", "function": {"name": "read", "description": output(0, 2000), "parameters": {}}}
    plain = RecordingContext(model="gpt-4o", tokens=counter)
    with_tools = RecordingContext(model="gpt-4o", tokens=counter, request={"tools": [tool]})
    trigger = plain.count_request(messages)
    assert clear(messages, plain, trigger=trigger) == messages
    assert cleared_ids(clear(messages, with_tools, trigger=trigger, keep=1)) == ["call_0", "call_1", "call_2"]


def test_clearing_is_decided_where_the_trigger_was_passed_and_then_kept(ctx: Context) -> None:
    messages = agent_loop(5, 1000)
    # Passed first at call_3's result: call_0..2 are cleared there, which brings the prompt back under the
    # trigger, so call_3 stays whole later although it too is older than the newest `keep`.
    trigger = ctx.count_request(messages[:10]) - 1
    assert cleared_ids(clear(messages, ctx, trigger=trigger, keep=1)) == ["call_0", "call_1", "call_2"]
    assert ctx.count_request(clear(messages, ctx, trigger=trigger, keep=1)) <= trigger


def test_the_trigger_is_also_checked_where_the_model_answered_and_at_the_end(ctx: Context) -> None:
    tools = agent_loop(4, 1000)
    trigger = ctx.count_request(tools)
    messages = [*tools, assistant("Done."), user(output(9, 4000))]
    assert cleared_ids(clear(messages, ctx, trigger=trigger, keep=1)) == ["call_0", "call_1", "call_2"]
    # The same decision is replayed once the model has answered and the conversation goes on.
    later = clear([*messages, assistant("ok"), user("next")], ctx, trigger=trigger, keep=1)
    assert later[: len(messages)] == clear(messages, ctx, trigger=trigger, keep=1)


def test_clear_at_least_blocks_a_clearing_that_frees_too_little(ctx: Context) -> None:
    messages = agent_loop(5, 1000)
    least = gain(ctx, messages[3])
    assert clear(messages, ctx, trigger=0, keep=4, clear_at_least=least + 1) == messages
    assert ctx.details == {"cleared_tool_uses": 0, "cleared_tokens": 0}
    assert cleared_ids(clear(messages, ctx, trigger=0, keep=4, clear_at_least=least)) == ["call_0"]


def test_clear_at_least_lets_old_tool_uses_pile_up_and_go_together(ctx: Context) -> None:
    messages = agent_loop(6, 1000)
    least = gain(ctx, messages[3]) * 5 // 2  # two results free too little, three enough
    assert cleared_ids(clear(messages, ctx, trigger=0, keep=1, clear_at_least=least)) == ["call_0", "call_1", "call_2"]
    assert ctx.details["cleared_tokens"] >= least


def test_excluded_tools_are_never_cleared_but_count_for_keep(ctx: Context) -> None:
    messages = [user("go")]
    for i, name in enumerate(["read", "memory", "read", "memory", "read"]):
        messages += [call(f"c{i}", name), result(f"c{i}", output(i, 1000))]
    assert cleared_ids(clear(messages, ctx, trigger=0, keep=1, exclude_tools=["memory"])) == ["c0", "c2"]


def test_clear_tool_inputs_leaves_valid_json_and_keeps_ids_and_names(ctx: Context) -> None:
    args = json.dumps({"path": "a.py", "content": output(9, 500)})
    messages = [user("go"), call("a", "write", args), result("a", output(0, 1000)), call("b"), result("b", "ok")]
    out = clear(messages, ctx, trigger=0, keep=1, clear_tool_inputs=True)
    assert out[1] == call("a", "write", "{}")
    assert json.loads(out[1]["tool_calls"][0]["function"]["arguments"]) == {}
    assert out[2] == result("a", cleared("write", output(0, 1000), args))
    # Only for the named tools when given a list.
    out = clear(messages, ctx, trigger=0, keep=1, clear_tool_inputs=["read"])
    assert out[1] == messages[1] and out[2] == result("a", cleared("write", output(0, 1000)))


def test_a_write_with_a_tiny_result_is_worth_clearing_only_with_its_inputs(ctx: Context) -> None:
    args = {"path": "a.py", "content": output(9, 2000)}
    messages = [user("go"), call("a", "write", args), result("a", "ok"), call("b"), result("b", "ok")]
    assert clear(messages, ctx, trigger=0, keep=1) == messages  # a placeholder longer than "ok" saves nothing
    out = clear(messages, ctx, trigger=0, keep=1, clear_tool_inputs=True)
    assert out[1] == call("a", "write", "{}") and out[2]["content"].startswith("[write output elided: 2 ")


def test_parallel_calls_are_cleared_one_by_one_and_stay_paired(ctx: Context) -> None:
    messages = [user("go"), calls("a", "b", "c")] + [result(i, output(n, 1000)) for n, i in enumerate("abc")]
    out = clear(messages, ctx, trigger=0, keep=1, clear_tool_inputs=True)
    assert cleared_ids(out) == ["a", "b"]
    assert [c["function"]["arguments"] for c in out[1]["tool_calls"]] == ["{}", "{}", '{"path": "c.py"}']
    assert [c["id"] for c in out[1]["tool_calls"]] == ["a", "b", "c"]
    assert pairing_problems(out) == []


def test_legacy_function_results_and_part_lists_are_cleared(ctx: Context) -> None:
    messages = [user("go"), legacy_call("ls", {"dir": "."}), legacy_result("ls", output(0, 1000))]
    messages += [call("a"), result("a", parts(output(1, 1000))), call("b"), result("b", "ok")]
    out = clear(messages, ctx, trigger=0, keep=1)
    assert out[2] == legacy_result("ls", cleared("ls", output(0, 1000)))
    assert out[4] == result("a", parts(cleared("read", output(1, 1000))))


def test_growing_requests_share_their_compacted_prefix_between_clearings(ctx: Context) -> None:
    full = agent_loop(30, 1000)
    params = {"trigger": 4000, "keep": 2, "clear_at_least": 1500}
    previous: list[Message] = []
    jumps = 0
    for end in range(4, len(full) + 1, 2):
        out = clear(full[:end], ctx, **params)
        if cleared_ids(out) != cleared_ids(previous):
            jumps += 1
        else:
            assert json.dumps(out[: len(previous)]) == json.dumps(previous)
        previous = out
    # Several clearings, each freeing at least clear_at_least tokens.
    assert 2 <= jumps <= ctx.details["cleared_tokens"] // params["clear_at_least"]


def test_params_are_checked() -> None:
    with pytest.raises(ValidationError):
        ClearToolUsesParams(keep=-1)
    with pytest.raises(ValidationError):
        ClearToolUsesParams(unknown=1)  # type: ignore[call-arg]


def test_the_input_is_not_mutated(ctx: Context) -> None:
    messages = agent_loop(5, 1000) + [assistant("done"), user("next")]
    snapshot = copy.deepcopy(messages)
    assert clear(messages, ctx, trigger=0, keep=1, clear_tool_inputs=True) != snapshot
    assert json.dumps(messages) == json.dumps(snapshot)


params = st.fixed_dictionaries(
    {
        "trigger": st.sampled_from([0, 0, 300, 1500, 100_000]),
        "keep": st.integers(0, 4),
        "clear_at_least": st.sampled_from([0, 0, 100, 1000]),
        "exclude_tools": st.sampled_from([[], [], ["run"], ["other"]]),
        "clear_tool_inputs": st.sampled_from([False, True, ["run"], ["other"]]),
    }
)
examples = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@examples
@given(conversations(), params)
def test_invariants_hold(counter: TokenCounter, messages: list[Message], p: dict[str, Any]) -> None:
    ctx = RecordingContext(model="gpt-4o", tokens=counter)
    out = keeps_the_invariants(lambda m: clear(m, ctx, **p), messages)
    assert ctx.count(messages) - ctx.count(out) == ctx.details["cleared_tokens"] >= 0
    assert len(out) == len(messages)
    for before, after in zip(messages, out, strict=True):
        if after is before:
            continue
        if is_tool_result(before):
            assert text_of(after["content"]).startswith("[run output elided: ")
            assert {**after, "content": None} == {**before, "content": None}
        elif "function_call" in before:  # only call arguments change, to the stub
            assert after == {**before, "function_call": {**before["function_call"], "arguments": "{}"}}
        else:
            assert {**after, "tool_calls": None} == {**before, "tool_calls": None}
            for old, new in zip(before["tool_calls"], after["tool_calls"], strict=True):
                assert new == old or new == {**old, "function": {**old["function"], "arguments": "{}"}}


@examples
@given(conversations(), params, st.sampled_from([30, 100, 300, 1000]))
def test_growing_requests_keep_a_byte_identical_prefix_until_the_cleared_set_jumps(
    counter: TokenCounter, messages: list[Message], p: dict[str, Any], clear_at_least: int
) -> None:
    p = {**p, "clear_at_least": clear_at_least}
    # The requests of this conversation: each prefix that ends where the model answers.
    ends = [i for i, m in enumerate(messages) if m["role"] == "assistant"] + [len(messages)]
    previous: list[Message] = []
    cleared_before = tokens_before = 0
    for end in ends:
        ctx = RecordingContext(model="gpt-4o", tokens=counter)
        out = clear(messages[:end], ctx, **p)
        count, tokens = ctx.details["cleared_tool_uses"], ctx.details["cleared_tokens"]
        assert count >= cleared_before  # the cleared set only grows
        if count == cleared_before:
            assert json.dumps(out[: len(previous)]) == json.dumps(previous)
        else:
            assert tokens - tokens_before >= p["clear_at_least"]  # and in steps worth a cache miss
        previous, cleared_before, tokens_before = out, count, tokens


def test_a_request_that_asks_the_provider_to_clear_is_left_to_it(counter: TokenCounter) -> None:
    messages = [user("task"), *[m for i in range(6) for m in (call(f"c{i}"), result(f"c{i}", "x" * 4000))]]
    edits = {"edits": [{"type": "clear_thinking_20251015"}, {"type": "clear_tool_uses_20250919", "keep": 3}]}
    ctx = RecordingContext(model="gpt-4o", tokens=counter, request={"context_management": edits})
    assert apply(ClearToolUses(ClearToolUsesParams(trigger=0, keep=1)), messages, ctx) == messages
    assert ctx.details["provider_clears"] is True


# --- Parallel calls: the same clearing, in work linear in the calls (issue 23) ----------------------------------


def reference(messages: list[Message], ctx: Context, p: ClearToolUsesParams) -> tuple[list[Message], int, int]:
    """clear_tool_uses written the straightforward way, as it was before issue 23: every call looked up by scanning
    its message, and each assistant message with stubbed arguments built and counted whole for every call it
    makes (so n parallel calls cost O(n^2)). Returns the messages, the uses cleared and the tokens freed.
    """
    out, count = list(messages), ctx.count_message
    pairs = find_pairs(messages)
    pending: list[tuple[ToolPair, Message]] = []
    pending_gain = cleared = cleared_tokens = 0
    stubbed: dict[int, dict[str | None, str]] = {}
    stubbed_call: dict[int, Message] = {}
    call_gain: dict[int, int] = {}

    def consider(pair: ToolPair) -> None:
        nonlocal pending_gain
        name = call_name(messages[pair.call_index], pair.call_id)
        if name in p.exclude_tools:
            return
        arguments = call_arguments(messages[pair.call_index], pair.call_id)
        wanted = p.clear_tool_inputs if isinstance(p.clear_tool_inputs, bool) else name in p.clear_tool_inputs
        if not (wanted and arguments is not None and len(arguments) > 2):
            arguments = None
        text = text_of(messages[pair.result_index].get("content"))
        inputs = (arguments, ctx.ref_for(arguments)) if arguments is not None else None
        new_result = with_message_text(messages[pair.result_index], elided(name, text, ctx.ref_for(text), inputs))
        gain = count(messages[pair.result_index]) - count(new_result)
        if arguments is not None:
            at = pair.call_index
            stubs = {**stubbed.get(at, {}), pair.call_id: "{}"}
            new_call = with_arguments(messages[at], stubs)
            gain += count(out[at]) - count(new_call) - call_gain.get(at, 0)
            if gain > 0:
                stubbed[at], stubbed_call[at], call_gain[at] = stubs, new_call, count(out[at]) - count(new_call)
        if gain > 0:
            pending.append((pair, new_result))
            pending_gain += gain

    use_at = {pair.result_index: n for n, pair in enumerate(pairs)}
    total, leaving = ctx.count_request([]), 0
    for index, message in enumerate(messages):
        total += count(message)
        n = use_at.get(index)
        if n is not None:
            while leaving <= n - p.keep:
                consider(pairs[leaving])
                leaving += 1
        elif index < len(messages) - 1 and messages[index + 1]["role"] != "assistant":
            continue
        if total > p.trigger and pending and pending_gain >= p.clear_at_least:
            for pair, new_result in pending:
                out[pair.result_index] = new_result
            for at, new_call in stubbed_call.items():
                out[at], call_gain[at] = new_call, 0
            total -= pending_gain
            cleared, cleared_tokens = cleared + len(pending), cleared_tokens + pending_gain
            pending, stubbed_call, pending_gain = [], {}, 0
    return out, cleared, cleared_tokens


@examples
@given(
    st.one_of(conversations(), conversations(max_parallel=40)),
    params,
    st.sampled_from([1.0, 1.0, 1.37, 0.61, 2.5]),
    st.booleans(),
)
def test_the_clearing_is_the_straightforward_walks_byte_for_byte(
    counter: TokenCounter, messages: list[Message], p: dict[str, Any], calibration: float, expandable: bool
) -> None:
    ctx = RecordingContext(model="gpt-4o", tokens=counter, calibration=calibration, expandable=expandable)
    out = clear(messages, ctx, **p)
    fresh = RecordingContext(model="gpt-4o", tokens=counter, calibration=calibration, expandable=expandable)
    expected, uses, tokens = reference(messages, fresh, ClearToolUsesParams(**p))
    assert json.dumps(out) == json.dumps(expected)
    assert (ctx.details["cleared_tool_uses"], ctx.details["cleared_tokens"]) == (uses, tokens)


@pytest.mark.parametrize("clear_tool_inputs", [False, True])
def test_thousands_of_parallel_calls_cost_work_linear_in_the_calls(
    shared_encodings: Encodings, clear_tool_inputs: bool
) -> None:
    def run(messages: list[Message], ctx: Context) -> list[Message]:
        out = clear(messages, ctx, trigger=0, keep=1, clear_tool_inputs=clear_tool_inputs)
        assert ctx.details["cleared_tool_uses"] == len(messages[2]["tool_calls"]) - 1  # all but the newest
        assert (out[2]["tool_calls"][0]["function"]["arguments"] == "{}") is clear_tool_inputs
        return out

    scans, _ = linear_in_parallel_calls(run, shared_encodings)
    assert scans <= 6  # pairing, looking up, counting, stubbing: each once
