"""Refs: every stub's ref resolves to what it replaced, and the expand tool's answers (strategies.refs)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import BUILTINS, Chain, Context, Registry, TokenCounter, format_chain
from strategies.conversation import arguments_of, is_tool_result, message_text, result_id, text_of
from strategies.markers import elided, truncate_middle
from strategies.messages import Message
from strategies.refs import (
    EXPAND_TOOL,
    LINE_CHARS,
    ExpandCall,
    Originals,
    expand,
    more_from,
    ref_of,
    refs_in,
    stub_refs,
)
from tests.factories import call, legacy_call, legacy_result, output, parts, result, user
from tests.strategies.generators import conversations, steps
from tests.strategies.harness import RecordingContext, ref

REGISTRY = Registry(BUILTINS)
reversible_steps = steps.filter(lambda spec: REGISTRY.get(spec.name).reversible)
chains = st.lists(reversible_steps, min_size=1, max_size=3).map(
    lambda specs: Chain.parse(format_chain(specs), REGISTRY)
)


def test_a_ref_is_ten_hex_digits_of_the_contents_sha256() -> None:
    assert ref_of("hello") == ref("hello") == "2cf24dba5f"
    assert ref_of("a\ud800b") == ref("a\ud800b")


def test_refs_are_found_in_stubs_also_inside_json_arguments() -> None:
    text = output(0, 1000)
    stub = elided("read", text, ref(text))
    assert refs_in(stub) == [ref(text)]
    arguments = json.dumps({"content": truncate_middle(text, 100, ref(text))})
    assert '\\"' in arguments and refs_in(arguments) == [ref(text)]
    # Only the stub's own phrase counts: a client's text with ref="..." and no tool name holds no stub.
    assert refs_in(f'see ref="{ref(text)}"') == []


def test_a_stub_names_the_clients_original_whatever_the_chain_did_to_it_first(ctx: Context) -> None:
    original = output(0, 1000)
    assert ctx.ref_for(original) == ref(original)
    # A lossless rewrite (minify) records its source: the rewritten text stands for the client's.
    minified = original.replace("line", "ln")
    ctx.rewrote(minified, original)
    assert ctx.ref_for(minified) == ref(original)
    # A text holding a stub already (pruned, truncated, a dedupe pointer) stands for what that stub names.
    assert ctx.ref_for(truncate_middle(minified, 100, ctx.ref_for(minified))) == ref(original)
    # A cycle of rewrites ends.
    ctx.rewrote("a", "b")
    ctx.rewrote("b", "a")
    assert ctx.ref_for("a") in (ref("a"), ref("b"))


def test_originals_resolve_results_arguments_and_the_strings_inside_them() -> None:
    big = output(1, 500)
    thought = output(2, 700)
    messages = [
        user("go"),
        {**call("a", "write", {"path": "a.py", "body": big}), "content": parts(thought)},
        result("a", output(0, 300)),
        legacy_call("ls", {"dir": "src"}),
        legacy_result("ls", "x.py"),
    ]
    originals = Originals(messages)
    assert originals.resolve(ref(output(0, 300))) == output(0, 300)
    assert originals.resolve(ref(big)) == big
    arguments = messages[1]["tool_calls"][0]["function"]["arguments"]
    assert originals.resolve(ref(arguments)) == arguments
    assert originals.resolve(ref("x.py")) == "x.py"
    assert originals.resolve(ref('{"dir": "src"}')) == '{"dir": "src"}'
    assert originals.resolve(ref(thought)) == thought  # what the model wrote (mask's inputs cuts old texts)
    # A user message is neither tool output nor the model's: it is never a ref's content.
    assert originals.resolve(ref("go")) is None
    assert originals.resolve("0123456789") is None


def test_expand_returns_the_whole_original_when_it_fits() -> None:
    text = output(0, 3000)
    originals = Originals([call("a"), result("a", text)])
    assert expand(originals, ExpandCall(ref(text)), max_chars=3000) == text


def test_a_long_original_comes_in_parts_by_lines_with_where_to_go_on() -> None:
    text = "".join(f"line {n}\n" for n in range(1, 1001))  # 1000 lines, 7 to 10 chars each
    originals = Originals([call("a"), result("a", text)])
    r = ref(text)
    first = expand(originals, ExpandCall(r), max_chars=1000)
    head, body = first.split("\n", 1)
    assert body == text[: len(body)] and body.endswith("\n") and len(body) <= 1000
    shown = body.count("\n")
    assert head == f'[ref="{r}": lines 1-{shown} of 1000; call compaction_expand with start_line={shown + 1} for more]'
    second = expand(originals, ExpandCall(r, start_line=shown + 1), max_chars=1000)
    assert second.split("\n", 2)[1] == f"line {shown + 1}"
    ranged = expand(originals, ExpandCall(r, start_line=10, end_line=12), max_chars=1000)
    assert ranged == f'[ref="{r}": lines 10-12 of 1000]\nline 10\nline 11\nline 12\n'
    last = expand(originals, ExpandCall(r, start_line=999, end_line=5000), max_chars=1000)
    assert last == f'[ref="{r}": lines 999-1000 of 1000]\nline 999\nline 1000\n'


def test_more_from_reads_where_an_expand_result_says_to_go_on_and_nothing_else() -> None:
    # The benchmarks' simulated agent reads on with it (bench.compaction.agent).
    text = "".join(f"line {n}\n" for n in range(1, 1001))
    originals = Originals([call("a"), result("a", text)])
    first = expand(originals, ExpandCall(ref(text)), max_chars=1000)
    shown = first.split("\n", 1)[1].count("\n")
    assert more_from(first) == shown + 1
    second = more_from(expand(originals, ExpandCall(ref(text), start_line=shown + 1), max_chars=1000))
    assert second is not None and second > shown + 1
    assert more_from(expand(originals, ExpandCall(ref(text), start_line=10, end_line=12), max_chars=1000)) is None
    assert more_from(expand(originals, ExpandCall(ref(text), start_line=999), max_chars=1000)) is None
    # An original shown whole that quotes such a note further on is no part.
    quoted = f'the log said: [ref="{ref(text)}": lines 1-2 of 9; call {EXPAND_TOOL} with start_line=3 for more]\n'
    assert more_from(expand(Originals([call("b"), result("b", quoted)]), ExpandCall(ref(quoted)), 1000)) is None


def test_a_single_huge_line_is_read_in_parts_too() -> None:
    text = "x" * (3 * LINE_CHARS + 5)  # minified JSON, say: no newline at all
    originals = Originals([call("a"), result("a", text)])
    r = ref(text)
    parts = [expand(originals, ExpandCall(r, start_line=n, end_line=n), max_chars=LINE_CHARS) for n in (1, 2, 3, 4)]
    assert [p.split("\n", 1)[0] for p in parts] == [f'[ref="{r}": lines {n}-{n} of 4]' for n in (1, 2, 3, 4)]
    assert "".join(p.split("\n", 1)[1] for p in parts) == text


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (ExpandCall("0000000000"), 'Error: no content with ref="0000000000" in this conversation.'),
        (ExpandCall(ref("one\ntwo"), start_line=3), f'Error: ref="{ref("one" + chr(10) + "two")}" has lines 1-2;'),
        (ExpandCall(ref("one\ntwo"), start_line=2, end_line=1), "Error: ref="),
    ],
)
def test_a_ref_or_range_that_does_not_resolve_is_an_error_result(call: ExpandCall, error: str) -> None:
    originals = Originals([{"role": "tool", "tool_call_id": "a", "content": "one\ntwo"}])
    assert expand(originals, call, max_chars=1000).startswith(error)


@pytest.mark.parametrize(
    "arguments",
    [
        '{"ref": 5}',
        "[]",
        "not json",
        '{"ref": ""}',
        '{"ref": "abc", "start_line": 0}',
        '{"ref": "a", "end_line": true}',
    ],
)
def test_bad_arguments_are_an_error_result_never_an_exception(arguments: str) -> None:
    parsed = ExpandCall.parse(arguments)
    assert isinstance(parsed, str) and parsed.startswith("Error: ")


def test_arguments_are_written_the_same_way_whatever_the_model_sent() -> None:
    a = ExpandCall.parse('{ "end_line": 9, "ref": "0a1b2c3d4e",  "start_line": 2 }')
    assert a == ExpandCall("0a1b2c3d4e", 2, 9)
    assert isinstance(a, ExpandCall) and a.arguments() == '{"ref":"0a1b2c3d4e","start_line":2,"end_line":9}'
    assert ExpandCall.parse('{"ref": "' + "f" * 500 + '"}') == ExpandCall("f" * 64)


examples = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@examples
@given(conversations(), chains)
def test_every_ref_in_a_stub_resolves_to_exactly_what_the_stub_replaced(
    counter: TokenCounter, messages: list[Message], chain: Chain
) -> None:
    after = chain.run(messages, RecordingContext(model="gpt-4o", tokens=counter)).messages
    originals = Originals(messages)
    results: dict[str | None, set[str]] = {}
    for m in messages:
        results.setdefault(result_id(m), set()).add(text_of(m.get("content")))
    argument_strings = {a for m in messages for a in arguments_of(m)}

    def in_arguments(content: str) -> bool:
        return any(content == a or json.dumps(content)[1:-1] in a for a in argument_strings)

    for message in after:
        for r in stub_refs([message]):
            content = originals.resolve(r)
            assert content is not None, r
            assert ref_of(content) == r
            if not is_tool_result(message):
                # shorten_tools' cut argument strings: one of the strings the client's arguments hold.
                assert in_arguments(content)
        call_id = result_id(message)
        held = refs_in(text_of(message.get("content")))
        if call_id is not None and held:
            # A result's stub stands for that very result (a dedupe pointer: for its identical first copy), and
            # with clear_tool_inputs names the call's arguments after it (or, when shorten_tools cut them first,
            # the string it cut).
            assert originals.resolve(held[0]) in results[call_id]  # a set: some models reuse ids
            # (A stub cut again, as mask's max_chars cuts a pruned result's tail, may show its ref twice.)
            assert all(
                originals.resolve(r) in results[call_id] or in_arguments(originals.resolve(r) or "") for r in held[1:]
            )


@examples
@given(conversations(), chains)
def test_where_the_tool_is_not_offered_no_stub_points_at_it(
    counter: TokenCounter, messages: list[Message], chain: Chain
) -> None:
    before = Chain.parse("none", REGISTRY).run(messages, Context(model="gpt-4o", tokens=counter)).messages
    mentions = sum(EXPAND_TOOL in message_text(m) + "".join(arguments_of(m)) for m in before)
    after = chain.run(messages, Context(model="gpt-4o", tokens=counter, expandable=False)).messages
    # Only what the client sent may name the tool: no stub this request made does.
    assert sum(EXPAND_TOOL in message_text(m) + "".join(arguments_of(m)) for m in after) <= mentions


def test_a_stub_without_the_tool_still_says_what_went(ctx: Context) -> None:
    text = "x" * 5000
    messages = [user("go"), call("a"), result("a", text), call("b"), result("b", "ok")]
    plain = Context(model="gpt-4o", tokens=ctx.tokens, expandable=False)
    after = Chain.parse("clear_tool_uses(trigger=0,keep=1)", REGISTRY).run(messages, plain).messages
    assert after[2]["content"] == "[read output elided: 5,000 chars]"
    assert truncate_middle(text, 100, None) == "x" * 50 + "[... 4,900 of 5,000 chars elided ...]" + "x" * 50


def test_mask_without_the_tool_runs_its_fallback_instead(ctx: Context) -> None:
    text = "x" * 5000
    messages = [user("go"), call("a"), result("a", text), call("b"), result("b", text)]
    plain = Context(model="gpt-4o", tokens=ctx.tokens, expandable=False)
    run = Chain.parse("mask(keep=0,epoch=0,min_gain=0)", REGISTRY).run(messages, plain)
    assert run.fallback == "not_expandable"
    assert run.messages[2] == messages[2] and run.messages[4]["content"].startswith("[same output as tool call a")
    with pytest.raises(ValueError, match="must not contain mask"):
        Chain.parse("mask(fallback=mask)", REGISTRY)
