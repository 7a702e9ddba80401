"""The stubs that say what was removed and how to get it back (strategies.markers)."""

from __future__ import annotations

import pytest

from strategies.markers import elided, pruned, same_as, truncate_middle

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
