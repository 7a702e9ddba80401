"""mask past its limit (strategies.degrade): masked more, old arguments shortened, fewer results whole, then the
oldest units left out behind one stub whose ref expands, the newest result cut only when it alone is too large.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import Context, ModelLimits, TokenCounter
from strategies.budget import window_total
from strategies.conversation import find_pairs, text_of
from strategies.degrade import Inputs, fit_masked
from strategies.invariants import compaction_problems
from strategies.mask import Mask, MaskParams
from strategies.messages import Message
from strategies.refs import Originals, refs_in, stub_refs
from tests.factories import RULE_ALONE, call, coding_session, output, result, system, user
from tests.strategies.generators import conversations, long_assistant_texts
from tests.strategies.harness import RecordingContext, apply, keeps_the_invariants

# The left-out stub, written out independently of strategies.markers.
LEFT_OUT = re.compile(r"^\[.* left out to fit the context window; call compaction_expand with ref=\"(\w+)\" to see")


def window(counter: TokenCounter, tokens: int, max_tokens: int = 256) -> RecordingContext:
    return RecordingContext(
        model="gpt-4o",
        tokens=counter,
        request={"max_tokens": max_tokens},
        limits=ModelLimits(context_window=tokens, max_output=4096),
    )


def mask(messages: list[Message], ctx: Context, **params: Any) -> list[Message]:
    return apply(Mask(MaskParams(**{**RULE_ALONE, **params})), messages, ctx)


def results(messages: list[Message]) -> dict[str, str]:
    return {m["tool_call_id"]: text_of(m["content"]) for m in messages if m["role"] == "tool"}


def whole(before: list[Message], after: list[Message]) -> list[str]:
    """The ids of the results forwarded as they came."""
    originals = results(before)
    return [call_id for call_id, text in results(after).items() if text == originals[call_id]]


def left_out_refs(messages: list[Message]) -> list[str]:
    found = [LEFT_OUT.match(text_of(m.get("content"))) for m in messages if m["role"] == "user"]
    return [match.group(1) for match in found if match is not None]


def test_past_the_limit_every_result_but_the_newest_is_a_stub_and_old_arguments_shrink_before_anything_goes(
    counter: TokenCounter,
) -> None:
    messages = coding_session(60)  # 75 results, about 40k tokens
    ctx = window(counter, 16_384)
    out = keeps_the_invariants(lambda m: mask(m, ctx), messages)
    assert ctx.count_request(out) <= window_total(ctx) - Mask(MaskParams()).room(ctx)
    assert results(out).keys() == results(messages).keys()  # every result still there
    assert left_out_refs(out) == []
    kept = whole(messages, out)
    assert kept == list(results(messages))[-len(kept) :] and 1 <= len(kept) <= 10  # the newest, whole
    # Every old write_file's content is cut head and tail, the arguments still JSON, its ref the whole content.
    originals = Originals(messages)
    written = [
        (json.loads(c["function"]["arguments"]), json.loads(o["function"]["arguments"]))
        for m, n in zip(out, messages, strict=True)
        if m["role"] == "assistant"
        for c, o in zip(m["tool_calls"], n["tool_calls"], strict=True)
        if c["function"]["name"] == "write_file" and c["id"] not in kept
    ]
    assert written
    for shortened, original in written:
        assert shortened["path"] == original["path"]
        assert len(shortened["content"]) < 400
        (ref,) = refs_in(shortened["content"])
        assert originals.resolve(ref) == original["content"]
    assert ctx.details["whole"] == len(kept)


def test_units_go_oldest_first_behind_one_stub_whose_ref_lists_them_once_stubs_do_not_fit(
    counter: TokenCounter,
) -> None:
    messages = coding_session(60)
    ctx = window(counter, 4096)
    out = keeps_the_invariants(lambda m: mask(m, ctx), messages)
    assert ctx.count_request(out) <= window_total(ctx) - Mask(MaskParams()).room(ctx)
    # The newest result alone is whole; what goes is a block of the oldest calls, right after the task.
    assert whole(messages, out) == [list(results(messages))[-1]]
    (ref,) = left_out_refs(out)
    assert out[:2] == messages[:2] and left_out_refs(out[2:3]) == [ref]
    forwarded = list(results(out))
    every = list(results(messages))
    gone = every[: len(every) - len(forwarded)]
    assert gone and forwarded == every[len(gone) :]
    # The ref expands to an index of exactly those calls, each with the ref of its result.
    index = Originals(messages).resolve(ref)
    assert index is not None
    lines = index.split("\n")[1:-1]
    assert [line.split(" ", 1)[0] for line in lines] == gone
    originals = Originals(messages)
    for line, call_id in zip(lines, gone, strict=True):
        (result_ref,) = re.findall(r'-> [\d,]+ chars, ref="(\w+)"$', line)
        assert originals.resolve(result_ref) == results(messages)[call_id]
    assert ctx.details["left_out_units"] > 0 and ctx.details["whole"] == 1


def test_the_newest_result_alone_larger_than_the_window_is_cut_head_and_tail_with_a_ref(counter: TokenCounter) -> None:
    huge = output(9, 40_000)
    messages = [system("You are a coding agent."), user("Fix it."), call("call_0"), result("call_0", huge)]
    ctx = window(counter, 2048)
    out = keeps_the_invariants(lambda m: mask(m, ctx), messages)
    assert ctx.count_request(out) <= window_total(ctx)
    cut = text_of(out[-1]["content"])
    head, tail = cut.split("[... ", 1)[0], cut.rsplit(" ...]", 1)[1]
    assert len(head) > 100 and huge.startswith(head) and huge.endswith(tail)
    (ref,) = refs_in(cut)
    assert Originals(messages).resolve(ref) == huge
    assert ctx.details["newest_cut"] is True


def test_with_inputs_the_models_old_writing_goes_before_any_unit_and_fewer_results_whole_cut_their_turns_text(
    counter: TokenCounter,
) -> None:
    thoughts = [f"Round {i}: " + "my reasoning about the next step. " * 45 for i in range(40)]
    messages = [system("You are a coding agent."), user("Implement it.")]
    for i, thought in enumerate(thoughts):
        messages += [{**call(f"call_{i}", "write_file", {"content": output(i, 1500)}), "content": thought}]
        messages += [result(f"call_{i}", output(i, 1500))]
    ctx = window(counter, 16_384)
    without = mask(messages, ctx)
    assert left_out_refs(without) != []  # the model's own writing is what fills the window
    out = keeps_the_invariants(lambda m: mask(m, ctx, inputs=True, text_chars=300), messages)
    assert ctx.count_request(out) <= window_total(ctx) - Mask(MaskParams()).room(ctx)
    assert left_out_refs(out) == [] and ctx.details["whole"] < 10
    # Every turn older than the newest whole result's has its text cut, with a ref to exactly what the model wrote.
    turns = [m for m in out if m["role"] == "assistant"]
    originals = Originals(messages)
    for turn, thought in zip(turns[: -ctx.details["whole"]], thoughts, strict=False):
        (ref,) = refs_in(turn["content"])
        assert originals.resolve(ref) == thought and len(turn["content"]) < 450
    assert [t["content"] for t in turns[-ctx.details["whole"] :]] == thoughts[-ctx.details["whole"] :]


def test_under_the_limit_mask_is_its_rule_alone(counter: TokenCounter) -> None:
    messages = coding_session(20)
    ctx = window(counter, 128_000)
    out = mask(messages, ctx, keep=3)
    assert whole(messages, out) == list(results(messages))[-3:]
    assert ctx.details == {"masked": len(results(messages)) - 3}
    assert [m for m in out if m["role"] == "assistant"] == [m for m in messages if m["role"] == "assistant"]


def shortened_strings_resolve(text: str, originals: Originals) -> None:
    """A string cut head and tail (markers.truncate_middle): its ref resolves to a text of the stated size that
    starts with its head and ends with its tail.
    """
    found = re.search(r"\[\.\.\. ([\d,]+) of ([\d,]+) chars elided; call compaction_expand with ref=\"(\w+)\"", text)
    if found is None:
        return
    original = originals.resolve(found.group(3))
    assert original is not None and len(original) == int(found.group(2).replace(",", ""))
    head, tail = text[: found.start()], text.rsplit(" ...]", 1)[1]
    assert original.startswith(head) and original.endswith(tail)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=st.one_of(conversations(), long_assistant_texts()),
    target=st.integers(0, 3000),
    inputs=st.one_of(st.none(), st.builds(Inputs, st.integers(1, 400))),
)
def test_every_new_ref_resolves_to_exactly_its_original(
    counter: TokenCounter, messages: list[Message], target: int, inputs: Inputs | None
) -> None:
    ctx = Context(model="gpt-4o", tokens=counter)
    out = fit_masked(messages, ctx, 2, 0, target, inputs).messages
    assert compaction_problems(messages, out) == []
    originals = Originals(messages)
    pairs = find_pairs(messages)
    for ref in stub_refs(out):
        assert originals.resolve(ref) is not None, ref
    for message in out:
        if message["role"] in ("tool", "assistant"):  # assistant: what inputs cut of old texts
            shortened_strings_resolve(text_of(message["content"]), originals)
        for tool_call in message.get("tool_calls") or []:
            arguments = tool_call["function"]["arguments"]
            if refs_in(arguments):
                for value in _strings(json.loads(arguments)):
                    shortened_strings_resolve(value, originals)
    for ref in left_out_refs(out):
        index = originals.resolve(ref)
        assert index is not None
        listed = [line.split(" ", 1)[0] for line in index.split("\n")[1:-1]]
        oldest = [p.call_id or "-" for p in sorted(pairs, key=lambda p: (p.call_index, p.result_index))]
        assert listed == oldest[: len(listed)]  # the oldest calls, in order
        if not _reused(messages):
            assert not {m.get("tool_call_id") for m in out if m["role"] == "tool"}.intersection(listed)


def _reused(messages: list[Message]) -> bool:
    """Models that reuse call ids (call_0 every turn) make ids no way to tell left-out calls from kept ones."""
    ids = [m.get("tool_call_id") for m in messages if m["role"] == "tool"]
    return len(ids) != len(set(ids))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []
