"""The stubs that say what was removed and how to get it back (strategies.markers)."""

from __future__ import annotations

import pytest

from strategies import BUILTINS, Chain, Context, Registry
from strategies.conversation import is_tool_result, message_text
from strategies.markers import (
    SAME_AS_PATTERN,
    elided,
    left_out,
    pruned,
    repeated,
    same_as,
    same_as_call,
    shown_to_the_user,
    stub_kind,
    truncate_middle,
)
from strategies.refs import Originals, refs_in
from tests.factories import call, output, result, user

REF = "0a1b2c3d4e"
HINT = f'call compaction_expand with ref="{REF}"'


def test_truncate_middle_keeps_head_and_tail_around_a_stub_with_the_ref() -> None:
    text = "".join(f"{i:04d}" for i in range(250))  # 1000 characters
    stub = f"[... 900 of 1,000 chars elided; {HINT} to see them all ...]"
    assert truncate_middle(text, 100, REF) == text[:50] + stub + text[-50:]


def test_truncate_middle_odd_size_gives_the_extra_character_to_the_head() -> None:
    text = "x" * 500 + "y" * 500
    assert truncate_middle(text, 7, REF).startswith("xxxx[... 993 of 1,000 chars elided;")
    assert truncate_middle(text, 7, REF).endswith("...]yyy")


@pytest.mark.parametrize("length", [0, 100, 120, 190])
def test_truncate_middle_leaves_text_the_stub_would_not_shorten(length: int) -> None:
    text = "z" * length
    assert truncate_middle(text, 100, REF) is text


def test_every_stub_names_the_tool_and_the_ref_it_is_given() -> None:
    text = "a\ud800b" * 1000  # lone surrogates, as clients can send them
    assert elided("read_file", text, REF) == f"[read_file output elided: 3,000 chars; {HINT} to see it]"
    assert elided("", "x", REF) == f"[tool output elided: 1 chars; {HINT} to see it]"
    with_inputs = elided("w", "out", REF, ('{"a": 1}', "ffffffffff"))
    assert with_inputs == f'[w output elided: 3 chars; {HINT} to see it; its arguments too: 8 chars, ref="ffffffffff"]'
    assert pruned(text, 5, REF) == f"{text[:5]}\n[... output truncated: 3,000 chars in all; {HINT} to see it]"
    assert same_as("call_7", text, REF) == f"[same output as tool call call_7 above: 3,000 chars; {HINT} to see it]"


def test_a_dedupe_pointer_is_read_back_as_the_call_it_names() -> None:
    assert same_as_call(same_as("call_7", "x" * 3000, REF)) == "call_7"
    assert same_as_call(same_as("toolu_01 above", "x", None)) == "toolu_01 above"  # no ref; an id with spaces
    assert SAME_AS_PATTERN.match(same_as("a", "x", REF)) is not None
    for other in (elided("read", "x" * 3000, REF), pruned("x" * 3000, 5, REF), "plain [same output as tool call a"):
        assert same_as_call(other) is None


# Each strategy that writes a stub for removed tool output, set so that it does on CONVERSATION.
CUTTING = [
    "mask(keep=1,epoch=0,min_gain=0)",
    "mask(max_chars=1000)",
    "clear_tool_uses(trigger=0,keep=1)",
    "prune_tool_outputs(max_chars=500)",
    "shorten_tools(max_tool_chars=0,full_tool_outputs=1,epoch=0,min_gain=0)",
    "dedupe",
]
OUTPUTS = [output(0, 3000), output(1, 3000), output(0, 3000), output(2, 3000)]  # the third repeats the first
CONVERSATION = [user("go")] + [m for i, text in enumerate(OUTPUTS) for m in (call(f"c{i}"), result(f"c{i}", text))]


@pytest.mark.parametrize("spec", CUTTING)
def test_what_reads_stubs_back_reads_every_strategys_own(spec: str, ctx: Context) -> None:
    # The benchmarks find a stub's ref with refs_in (strategies.refs) and a dedupe pointer with same_as_call: a
    # change in a strategy's marker must break this test, not a benchmark's figures silently.
    out = Chain.parse(spec, Registry(BUILTINS)).run(CONVERSATION, ctx).messages
    originals = Originals(CONVERSATION)
    before = {m["tool_call_id"]: message_text(m) for m in CONVERSATION if is_tool_result(m)}
    stubs = [m for m in out if is_tool_result(m) and message_text(m) != before[m["tool_call_id"]]]
    assert stubs, "the strategy wrote no stub here"
    for stub in stubs:
        text, original = message_text(stub), before[stub["tool_call_id"]]
        refs = refs_in(text)
        assert refs and originals.resolve(refs[0]) == original, text
        assert same_as_call(text) == ("c0" if spec == "dedupe" else None), text


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (elided("read", "x" * 500, "0a1b2c3d4e"), "whole"),
        (elided("", "x" * 500, None, ("{}", None)), "whole"),
        (same_as("c0", "x" * 500, "0a1b2c3d4e"), "whole"),
        (shown_to_the_user("Search results", 7), "whole"),
        (truncate_middle("x" * 500, 100, "0a1b2c3d4e"), "part"),
        (pruned("x" * 500, 100, None), "part"),
        (left_out({"read": 3}, 1, 9000, "0a1b2c3d4e"), "left_out"),
        ("the log said [read output elided: 500 chars]", None),  # a stub's words later in a text are none
        ("plain output", None),
        (repeated(3), None),  # minify's marker is lossless: it stands for nothing removed
    ],
)
def test_stub_kind_tells_a_whole_stub_from_a_cut_and_a_left_out_block(text: str, kind: str | None) -> None:
    assert stub_kind(text) == kind
