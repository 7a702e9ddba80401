from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import Context, TokenCounter
from strategies.conversation import text_of
from strategies.dedupe import Dedupe, DedupeParams
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
    system,
    user,
)
from tests.strategies.generators import characters, conversations
from tests.strategies.harness import RecordingContext, apply, expand_hint, keeps_the_invariants


def dedupe(messages: list[Message], ctx: Context, **params: Any) -> list[Message]:
    return apply(Dedupe(DedupeParams(**params)), messages, ctx)


def pointer(call_id: str, text: str) -> str:
    """The pointer format, written out independently of strategies.dedupe."""
    return f"[same output as tool call {call_id} above: {len(text):,} chars; {expand_hint(text)} to see it]"


def test_a_repeated_result_points_to_the_first_copy_which_stays(ctx: Context) -> None:
    text = output(0, 300)
    messages = [user("go"), call("a"), result("a", text), call("b"), result("b", output(1, 300))]
    messages += [calls("c", "d"), result("c", text), result("d", text)]
    out = dedupe(messages, ctx)
    assert out[:5] == messages[:5] and all(a is b for a, b in zip(out[:6], messages[:6], strict=True))
    assert out[6] == result("c", pointer("a", text)) and out[7] == result("d", pointer("a", text))
    assert out[6]["content"] == f"[same output as tool call a above: 300 chars; {expand_hint(text)} to see it]"


def test_content_part_lists_compare_by_text_and_keep_their_other_parts(ctx: Context) -> None:
    text = output(0, 300)
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    cached = {"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}
    out = dedupe([call("a"), result("a", parts(text)), call("b"), result("b", [cached, image])], ctx)
    assert out[3]["content"] == [{**cached, "text": pointer("a", text)}, image]


def test_only_results_of_at_least_min_chars_are_replaced_and_only_by_a_shorter_pointer(ctx: Context) -> None:
    short, edge = output(0, 199), output(1, 200)
    messages = [call("a"), result("a", short), call("b"), result("b", short), call("c"), result("c", edge)]
    messages += [call("d"), result("d", edge)]
    assert dedupe(messages, ctx)[3] is messages[3]
    assert dedupe(messages, ctx)[7] == result("d", pointer("c", edge))
    assert dedupe(messages, ctx, min_chars=0)[3] == result("b", pointer("a", short))
    tiny = [call("a"), result("a", "ok"), call("b"), result("b", "ok")]
    assert dedupe(tiny, ctx, min_chars=0) == tiny  # the pointer would be longer


def test_legacy_function_results_are_neither_replaced_nor_pointed_at(ctx: Context) -> None:
    text = output(0, 300)
    messages = [legacy_call("ls", {}), legacy_result("ls", text), legacy_call("ls", {}), legacy_result("ls", text)]
    messages += [call("a"), result("a", text), call("b"), result("b", text)]
    out = dedupe(messages, ctx)
    assert out[:6] == messages[:6] and out[7] == result("b", pointer("a", text))


def test_a_reused_call_id_is_never_pointed_at(ctx: Context) -> None:
    text = output(0, 300)
    # Some models number their calls call_0, call_1 ... again every turn.
    same_id = [call("call_0"), result("call_0", text), user("again"), call("call_0"), result("call_0", text)]
    assert dedupe(same_id, ctx) == same_id
    reused = [call("call_0"), result("call_0", text), call("call_0"), result("call_0", output(1, 300))]
    reused += [call("call_1"), result("call_1", text)]
    assert dedupe(reused, ctx) == reused


def test_a_pointer_written_stays_when_its_id_is_reused_later(ctx: Context) -> None:
    text = output(0, 300)
    messages = [call("call_0"), result("call_0", text), call("call_1"), result("call_1", text)]
    later = [*messages, user("next"), call("call_0"), result("call_0", output(2, 300))]
    assert dedupe(later, ctx)[:4] == dedupe(messages, ctx)
    assert dedupe(messages, ctx)[3] == result("call_1", pointer("call_0", text))


def test_non_tool_messages_and_unique_results_are_the_same_objects(ctx: Context) -> None:
    text = output(0, 300)
    messages = [system(text), user(text), assistant(text), *agent_loop(3, 500), user(text)]
    out = dedupe(messages, ctx)
    assert all(a is b for a, b in zip(out, messages, strict=True))


def test_the_input_is_not_mutated(ctx: Context) -> None:
    text = output(0, 300)
    messages = [call("a"), result("a", text), call("b"), result("b", parts(text))]
    snapshot = copy.deepcopy(messages)
    assert dedupe(messages, ctx) != snapshot
    assert messages == snapshot


@st.composite
def with_repeats(draw: st.DrawFn) -> list[Message]:
    """A generated conversation where tool results often repeat one of a few outputs of 0-1000 characters;
    two to four more interactions (with ids that are never reused) before the last user message always do.
    """
    messages = draw(conversations())
    seeds = draw(st.lists(st.text(characters, min_size=1, max_size=12), min_size=1, max_size=3))
    sizes = [draw(st.one_of(st.integers(0, 100), st.integers(100, 1000))) for _ in seeds]
    repeated = [(seed * size)[:size] for seed, size in zip(seeds, sizes, strict=True)]
    for n in range(draw(st.integers(2, 4))):
        messages[-1:-1] = [call(f"repeat_{n}"), result(f"repeat_{n}", draw(st.sampled_from(repeated)))]
    for index, message in enumerate(messages):
        if message["role"] in ("tool", "function") and draw(st.booleans()):
            text = draw(st.sampled_from(repeated))
            messages[index] = {**message, "content": parts(text) if draw(st.booleans()) else text}
    return messages


examples = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
min_chars = st.sampled_from([0, 50, 200])


@examples
@given(with_repeats(), min_chars)
def test_properties_over_conversations(counter: TokenCounter, messages: list[Message], minimum: int) -> None:
    ctx = RecordingContext(model="gpt-4o", tokens=counter)
    out = keeps_the_invariants(lambda m: dedupe(m, ctx, min_chars=minimum), messages)
    for index, (before, after) in enumerate(zip(messages, out, strict=True)):
        if after is before:
            continue
        text = text_of(before["content"])
        # A replaced result says which earlier result holds its text, and how long that text is.
        firsts = [m["tool_call_id"] for m in messages[:index] if m["role"] == "tool" and text_of(m["content"]) == text]
        assert text_of(after["content"]) == pointer(firsts[0], text)
        assert {k: v for k, v in after.items() if k != "content"} == {k: v for k, v in before.items() if k != "content"}


@examples
@given(with_repeats(), min_chars)
def test_each_request_is_a_prefix_of_the_next(counter: TokenCounter, messages: list[Message], minimum: int) -> None:
    """The model answers at every assistant message, so each request is the conversation up to one: its
    compaction must be the same prefix of the next request's, byte for byte.
    """
    ctx = RecordingContext(model="gpt-4o", tokens=counter)
    whole = dedupe(messages, ctx, min_chars=minimum)
    for end in [k for k, m in enumerate(messages) if m["role"] == "assistant"]:
        assert json.dumps(dedupe(messages[:end], ctx, min_chars=minimum)) == json.dumps(whole[:end])
