from __future__ import annotations

import copy

from strategies import Context
from strategies.messages import Message
from strategies.prune_tool_outputs import PruneToolOutputs, PruneToolOutputsParams
from tests.factories import assistant, call, legacy_call, legacy_result, output, parts, result, system, user
from tests.strategies.harness import apply, expand_hint


def prune(messages: list[Message], ctx: Context, **params: int) -> list[Message]:
    return apply(PruneToolOutputs(PruneToolOutputsParams(**params)), messages, ctx)


def pruned(text: str, max_chars: int) -> str:
    return f"{text[:max_chars]}\n[... output truncated: {len(text):,} chars in all; {expand_hint(text)} to see it]"


def test_a_long_result_keeps_exactly_its_first_max_chars_and_a_note(ctx: Context) -> None:
    text = output(0, 5000)
    out = prune([user("go"), call("a"), result("a", text)], ctx)
    assert out[2] == result("a", pruned(text, 4000))
    assert out[2]["content"].startswith(text[:4000] + "\n[... output truncated: 5,000 chars in all; call compaction_")


def test_max_chars_is_honoured(ctx: Context) -> None:
    text = output(0, 300)
    assert prune([call("a"), result("a", text)], ctx, max_chars=10)[1]["content"] == pruned(text, 10)
    assert prune([call("a"), result("a", text)], ctx, max_chars=0)[1]["content"] == pruned(text, 0)


def test_short_results_and_non_tool_messages_are_the_same_objects(ctx: Context) -> None:
    long = output(1, 9000)
    messages = [system(long), user(long), assistant(long), call("a"), result("a", output(0, 100)), call("b")]
    messages.append(result("b", output(2, 100)))
    out = prune(messages, ctx, max_chars=100)
    assert len(out) == len(messages) and all(a is b for a, b in zip(out, messages, strict=True))


def test_content_part_lists_are_pruned_and_keep_their_other_parts(ctx: Context) -> None:
    text = output(0, 500)
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    out = prune([call("a"), result("a", [*parts(text), image])], ctx, max_chars=100)
    assert out[1]["content"] == [*parts(pruned(text, 100)), image]


def test_legacy_function_results_are_pruned_too(ctx: Context) -> None:
    text = output(0, 500)
    out = prune([legacy_call("ls", {}), legacy_result("ls", text)], ctx, max_chars=100)
    assert out[1] == legacy_result("ls", pruned(text, 100))


def test_the_input_is_not_mutated(ctx: Context) -> None:
    messages = [call("a"), result("a", parts(output(0, 500))), call("b"), result("b", output(1, 500))]
    snapshot = copy.deepcopy(messages)
    assert prune(messages, ctx, max_chars=10) != snapshot
    assert messages == snapshot
