from __future__ import annotations

import copy
import json
from typing import Any

from strategies import Context, Encodings
from strategies.conversation import text_of
from strategies.invariants import pairing_problems
from strategies.messages import Message
from strategies.shorten_tools import ShortenTools, ShortenToolsParams
from tests.factories import (
    RULE_ALONE,
    agent_loop,
    assistant,
    call,
    calls,
    legacy_call,
    legacy_result,
    output,
    parts,
    result,
    system,
    tool_call,
    user,
)
from tests.strategies.harness import apply, expand_hint, linear_in_parallel_calls


def shorten(messages: list[Message], ctx: Context, **params: Any) -> list[Message]:
    return apply(ShortenTools(ShortenToolsParams(**{**RULE_ALONE, **params})), messages, ctx)


def truncated(text: str, keep: int) -> str:
    """The stub format, written out independently of strategies.markers."""
    n, head, tail = len(text), keep - keep // 2, keep // 2
    stub = f"[... {n - keep:,} of {n:,} chars elided; {expand_hint(text)} to see them all ...]"
    return f"{text[:head]}{stub}{text[n - tail :]}"


def tool_chars(messages: list[Message]) -> int:
    """What max_tool_chars measures: every result's text plus every call's argument string."""
    results = sum(len(m["content"]) for m in messages if m["role"] == "tool")
    arguments = sum(len(c["function"]["arguments"]) for m in messages for c in m.get("tool_calls", []))
    return results + arguments


def test_nothing_is_touched_while_tool_traffic_is_within_max_tool_chars(ctx: Context) -> None:
    messages = agent_loop(5, 1000)
    out = shorten(messages, ctx, max_tool_chars=tool_chars(messages), full_tool_outputs=0, max_tool_calls=0)
    assert len(out) == len(messages) and all(a is b for a, b in zip(out, messages, strict=True))


def test_the_budget_is_spent_newest_first(ctx: Context) -> None:
    messages = agent_loop(5, 1000)
    oldest = len(messages[3]["content"]) + len(messages[2]["tool_calls"][0]["function"]["arguments"])
    out = shorten(messages, ctx, max_tool_chars=tool_chars(messages) - oldest, full_tool_outputs=0, max_tool_calls=0)
    assert out == messages[:2] + messages[4:]


def test_three_tiers_by_count(ctx: Context) -> None:
    messages = agent_loop(8, 1000)
    out = shorten(messages, ctx, max_tool_chars=0, full_tool_outputs=2, max_tool_calls=5)
    middle = [m for i in (3, 4, 5) for m in (call(f"call_{i}"), result(f"call_{i}", truncated(output(i, 1000), 400)))]
    assert out == messages[:2] + middle + messages[-4:]
    assert [json.dumps(m) for m in out[-4:]] == [json.dumps(m) for m in messages[-4:]]


def test_short_string_length_sets_the_kept_size(ctx: Context) -> None:
    messages = agent_loop(2, 1000)
    out = shorten(messages, ctx, max_tool_chars=0, full_tool_outputs=1, short_string_length=50)
    assert out[3]["content"] == truncated(output(0, 1000), 100)
    assert out[3]["content"].count("line") < 20


def test_max_tool_outputs_can_drop_before_max_tool_calls(ctx: Context) -> None:
    out = shorten(agent_loop(6, 1000), ctx, max_tool_chars=0, full_tool_outputs=1, max_tool_outputs=3)
    assert [m["tool_call_id"] for m in out if m["role"] == "tool"] == ["call_3", "call_4", "call_5"]


def test_a_dropped_call_keeps_the_assistant_text_it_came_with(ctx: Context) -> None:
    talking = {"role": "assistant", "content": "Let me look.", "tool_calls": [tool_call("a")]}
    messages = [user("go"), talking, result("a", output(0, 1000)), call("b"), result("b", "ok"), user("next")]
    out = shorten(messages, ctx, max_tool_chars=0, full_tool_outputs=1, max_tool_calls=1)
    assert out == [user("go"), assistant("Let me look."), call("b"), result("b", "ok"), user("next")]


def test_parallel_calls_lose_only_the_dropped_ones(ctx: Context) -> None:
    messages = [user("go"), calls("a", "b", "c"), result("a", "A"), result("b", "B"), result("c", "C"), user("?")]
    out = shorten(messages, ctx, max_tool_chars=0, full_tool_outputs=2, max_tool_calls=2)
    assert out == [user("go"), calls("b", "c"), result("b", "B"), result("c", "C"), user("?")]
    # All calls dropped: the message goes, rather than keeping an empty tool_calls list the API rejects.
    assert shorten(messages, ctx, max_tool_chars=0, full_tool_outputs=0, max_tool_calls=0) == [user("go"), user("?")]


def test_middle_band_arguments_are_shortened_and_stay_valid_json(ctx: Context) -> None:
    body = output(9, 1000)
    messages = [user("go")]
    for i in range(2):
        messages += [
            call(f"w{i}", "write", {"path": "x.py", "content": body, "mode": [3, body]}),
            result(f"w{i}", "ok"),
        ]
    out = shorten(messages, ctx, max_tool_chars=0, full_tool_calls=1, short_string_length=50)
    old = json.loads(out[1]["tool_calls"][0]["function"]["arguments"])
    assert old == {"path": "x.py", "content": truncated(body, 50), "mode": [3, truncated(body, 50)]}
    assert out[3] is messages[3]


def test_arguments_that_are_not_json_are_left_alone(ctx: Context) -> None:
    broken = '{"content": "' + "y" * 1000
    messages = [user("go"), call("a", "write", broken), result("a", "ok"), call("b"), result("b", "ok")]
    out = shorten(messages, ctx, max_tool_chars=0, short_string_length=50)
    assert out[1]["tool_calls"][0]["function"]["arguments"] == broken


def test_content_part_lists_are_truncated_and_stay_lists(ctx: Context) -> None:
    text = output(0, 1000)
    messages = [user("go"), call("a"), result("a", parts(text)), call("b"), result("b", parts("ok"))]
    out = shorten(messages, ctx, max_tool_chars=0, full_tool_outputs=1)
    assert out[2]["content"] == parts(truncated(text, 400))
    assert out[4] is messages[4]


def test_legacy_function_pairs_get_the_same_tiers(ctx: Context) -> None:
    messages = [user("go")]
    for i in range(3):
        messages += [legacy_call("read", {"n": i}), legacy_result("read", output(i, 1000))]
    out = shorten(messages, ctx, max_tool_chars=0, full_tool_outputs=1, max_tool_calls=2)
    assert out == [
        user("go"),
        legacy_call("read", {"n": 1}),
        legacy_result("read", truncated(output(1, 1000), 400)),
        legacy_call("read", {"n": 2}),
        legacy_result("read", output(2, 1000)),
    ]


def test_every_non_tool_message_is_forwarded_byte_identical(ctx: Context) -> None:
    messages = [system("Be brief."), {"role": "developer", "content": "Use tools."}, user("Fix it.")]
    for i in range(6):
        messages += [assistant(f"Step {i}."), call(f"c{i}"), result(f"c{i}", output(i, 3000))]
    messages.append(user("Done?"))
    out = shorten(messages, ctx, max_tool_chars=0, full_tool_outputs=1, max_tool_calls=3)

    def plain(ms: list[Message]) -> list[str]:
        return [json.dumps(m) for m in ms if m["role"] != "tool" and "tool_calls" not in m]

    assert plain(out) == plain(messages)
    assert len(out) < len(messages)


def test_the_input_is_not_mutated(ctx: Context) -> None:
    messages = [user("go")]
    for i in range(4):
        messages += [calls(f"a{i}", f"b{i}"), result(f"a{i}", parts(output(i, 2000))), result(f"b{i}", output(i, 900))]
        messages[-3]["tool_calls"][0]["function"]["arguments"] = json.dumps({"text": output(i, 800)})
    snapshot = copy.deepcopy(messages)
    out = shorten(messages, ctx, max_tool_chars=0, full_tool_outputs=2, max_tool_calls=5, short_string_length=20)
    assert out != snapshot
    assert json.dumps(messages) == json.dumps(snapshot)


def test_a_reused_call_id_pairs_with_the_newest_call(ctx: Context) -> None:
    messages = [user("go")]
    for i, path in enumerate(["a.py", "b.py", "c.py"]):
        messages += [call("call_0", args={"path": path}), result("call_0", output(i, 1000))]
    out = shorten(messages, ctx, max_tool_chars=0, full_tool_outputs=1, max_tool_calls=2)
    assert out == [
        user("go"),
        call("call_0", args={"path": "b.py"}),
        result("call_0", truncated(output(1, 1000), 400)),
        call("call_0", args={"path": "c.py"}),
        result("call_0", output(2, 1000)),
    ]
    assert pairing_problems(out) == []


def test_thousands_of_parallel_calls_cost_work_linear_in_the_calls(shared_encodings: Encodings) -> None:
    """Every call's arguments read (no tier drops any): looked up in an index of the message's calls."""

    def run(messages: list[Message], ctx: Context) -> list[Message]:
        out = shorten(messages, ctx, max_tool_chars=0, full_tool_outputs=0, max_tool_calls=10**6, short_string_length=5)
        assert len(out) == len(messages) and len(text_of(out[3]["content"])) < len(text_of(messages[3]["content"]))
        return out

    linear_in_parallel_calls(run, shared_encodings)
