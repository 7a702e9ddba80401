"""mask: the newest tool results whole, older ones one-line stubs with a ref, the boundary moved in epochs."""

from __future__ import annotations

import json
from typing import Any

from strategies import BUILTINS, Chain, Context, Encodings, Registry
from strategies.conversation import text_of
from strategies.mask import Mask, MaskParams
from strategies.messages import Message
from strategies.refs import Originals, refs_in
from tests.factories import RULE_ALONE, agent_loop, call, output, parts, result, user
from tests.strategies.harness import apply, expand_hint, keeps_the_invariants, linear_in_parallel_calls


def mask(messages: list[Message], ctx: Context, **params: Any) -> list[Message]:
    return apply(Mask(MaskParams(**{**RULE_ALONE, **params})), messages, ctx)


def stub(name: str, text: str) -> str:
    """The stub format, written out independently of strategies.markers."""
    return f"[{name} output elided: {len(text):,} chars; {expand_hint(text)} to see it]"


def whole_results(messages: list[Message]) -> list[str]:
    return [m["tool_call_id"] for m in messages if m["role"] == "tool" and not refs_in(text_of(m["content"]))]


def test_all_but_the_newest_keep_results_become_stubs_naming_tool_and_ref(ctx: Context) -> None:
    messages = agent_loop(6, 1000)
    out = mask(messages, ctx, keep=2)
    assert whole_results(out) == ["call_4", "call_5"]
    assert out[3] == result("call_0", stub("read", output(0, 1000)))
    # Only results change: every call, its id and every other message stay the very same objects.
    assert [m for m in out if m["role"] != "tool"] == [m for m in messages if m["role"] != "tool"]
    assert all(a is b for a, b in zip(out, messages, strict=True) if a["role"] != "tool")
    assert ctx.details["masked"] == 4


def test_a_result_shorter_than_its_stub_stays_and_part_lists_keep_their_shape(ctx: Context) -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    messages = [user("go"), call("a"), result("a", "ok"), call("b"), result("b", [*parts(output(1, 900)), image])]
    messages += [call("c"), result("c", output(2, 900))]
    out = mask(messages, ctx, keep=1)
    assert out[2] is messages[2]
    assert out[4]["content"] == [*parts(stub("read", output(1, 900))), image]


def test_every_stub_resolves_to_the_clients_original_also_after_minify(ctx: Context) -> None:
    pretty = json.dumps({"files": [f"src/module_{i}.py" for i in range(60)]}, indent=4)
    messages = [user("go"), call("a", "ls"), result("a", pretty), call("b"), result("b", output(1, 900))]
    out = Chain.parse("minify,mask(keep=1,epoch=0,min_gain=0)", Registry(BUILTINS)).run(messages, ctx).messages
    (ref,) = refs_in(out[2]["content"])
    assert Originals(messages).resolve(ref) == pretty
    # The stub counts what the model would have read: the minified text.
    compact = json.dumps(json.loads(pretty), separators=(",", ":"))
    assert out[2]["content"].startswith(f"[ls output elided: {len(compact):,} chars;")


def test_max_chars_cuts_whole_results_on_arrival_and_leaves_stubs(ctx: Context) -> None:
    messages = agent_loop(4, 3000)
    out = mask(messages, ctx, keep=2, max_chars=500)
    assert out[3]["content"] == stub("read", output(0, 3000))
    newest = out[-1]["content"]
    assert newest.startswith(output(3, 3000)[:250]) and newest.endswith(output(3, 3000)[-250:])
    assert f"2,500 of 3,000 chars elided; {expand_hint(output(3, 3000))}" in newest


def test_between_jumps_each_request_extends_the_one_before(ctx: Context) -> None:
    """An agent loop sends one request per tool result: with epochs of 5 calls, the compacted requests share
    their prefix except at a jump, and at most keep + epoch results are whole."""
    full = agent_loop(30, 1000)
    previous: list[Message] | None = None
    jumps = 0
    for n in range(1, 31):
        out = mask(full[: 2 + 2 * n], ctx, keep=3, epoch=5, min_gain=0)
        assert len(whole_results(out)) <= 3 + 5
        if previous is not None and out[: len(previous)] != previous:
            jumps += 1
        previous = out
    assert 3 <= jumps <= 6


def test_the_invariants_hold(ctx: Context) -> None:
    messages = agent_loop(12, 800)
    keeps_the_invariants(lambda m: mask(m, ctx, keep=2, max_chars=300), messages)
    keeps_the_invariants(lambda m: mask(m, ctx, keep=0, epoch=2, min_gain=0.35), messages)


def test_thousands_of_parallel_results_cost_work_linear_in_the_calls(shared_encodings: Encodings) -> None:
    """Each stub names its call's tool: looked up in an index of the message's calls, not by scanning them."""

    def run(messages: list[Message], ctx: Context) -> list[Message]:
        out = mask(messages, ctx, keep=1)
        assert len(whole_results(out)) == 1
        return out

    linear_in_parallel_calls(run, shared_encodings)
    linear_in_parallel_calls(
        lambda m, ctx: mask(m, ctx, keep=1, max_chars=50, epoch=1, min_gain=0.01), shared_encodings
    )
