from __future__ import annotations

import copy
import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import Context, TokenCounter
from strategies.conversation import is_tool_result, text_of
from strategies.messages import Message
from strategies.minify import Minify, MinifyParams
from tests.factories import assistant, call, legacy_call, legacy_result, parts, result, system, user
from tests.strategies.generators import conversations
from tests.strategies.harness import RecordingContext, apply, keeps_the_invariants

LINE = "WARNING: deprecated call in module foo"  # 38 characters: 2 copies outweigh a marker


def minify(messages: list[Message], ctx: Context, **params: Any) -> list[Message]:
    return apply(Minify(MinifyParams(**params)), messages, ctx)


def minified(text: str, ctx: Context, **params: Any) -> str:
    out = minify([call("a"), result("a", text)], ctx, **params)[1]["content"]
    assert isinstance(out, str)
    return out


def exact(text: str) -> Any:
    """What any JSON parser reads, with number types, exact values, key order and duplicate keys kept."""
    return json.loads(
        text,
        parse_float=lambda s: ("float", Decimal(s)),
        parse_int=lambda s: ("int", s.lstrip("-").lstrip("0") or "0", s.startswith("-")),
        parse_constant=lambda s: ("constant", s),
        object_pairs_hook=lambda pairs: ("object", pairs),
    )


def test_json_is_rewritten_compactly_keeping_key_order_and_non_ascii_text(ctx: Context) -> None:
    text = '{\n  "zeta": [1, 2.5, true, null],\n  "alpha": "caf\\u00e9 \\ud83d\\ude00",\n  "n": {"x": -3}\n}\n'
    assert minified(text, ctx) == '{"zeta":[1,2.5,true,null],"alpha":"café 😀","n":{"x":-3}}'
    assert minified("[ 1.0, 1, 0.1, 1e-05, -0.0, 123456789012345678901234567890 ]", ctx) == (
        "[1.0,1,0.1,1e-05,-0.0,123456789012345678901234567890]"
    )


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',  # duplicate keys: json.loads would keep only the last
        '[{"k": [1, 2], "k": null}]',
        "[1e2, 3]",  # floats that json.dumps would spell differently
        "[1.50, 3]",
        "[1E400]",  # infinity after parsing
        "[NaN, 1]",
        "[Infinity, -Infinity]",
        "[-0, 1]",
        "[" + "9" * 5000 + "]",  # over Python's integer conversion limit
        '[ "\\ud800" ]',  # a lone surrogate cannot be written raw
        '  "a JSON string  "  ',  # scalars are left alone
        "  42  ",
        "[1,2]",  # already compact
        "[\n" * 2000 + "]\n" * 2000,  # too deep to check; the line rules would collapse the brackets
    ],
)
def test_json_that_could_change_or_would_not_shrink_is_left_byte_identical(text: str, ctx: Context) -> None:
    assert minified(text, ctx) == text


def test_refused_json_gets_no_line_rules_either(ctx: Context) -> None:
    text = '{\n  "a": 1,   \n  "a": 2\n}'
    assert minified(text, ctx) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\x1b[1;31mERROR\x1b[0m: failed \x1b[2K\x1b[1A", "ERROR: failed"),
        ("\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\ and \x1b]0;title\x07done", "link and done"),
        ("\x1b(Bplain\x1b7\x1b8\x1b=\x1bc", "plain"),
        ("\x1bPq#0;2;0;0;0\x1b\\sixel gone", "sixel gone"),
        ("\x1b\x1b[0m[31mred", "red"),  # removing one sequence completes another
        ("truncated \x1b[12", "truncated \x1b[12"),  # malformed sequences stay
    ],
)
def test_ansi_escape_codes_are_removed(text: str, expected: str, ctx: Context) -> None:
    assert minified(text, ctx) == expected


def test_coloured_json_is_compacted_once_its_escape_codes_are_gone(ctx: Context) -> None:
    text = '{\n  \x1b[34m"a"\x1b[0m: \x1b[32m"x"\x1b[0m,\n  \x1b[34m"b"\x1b[0m: [1, 2]\n}'
    assert minified(text, ctx) == '{"a":"x","b":[1,2]}'


def test_trailing_whitespace_goes_and_the_lines_stay(ctx: Context) -> None:
    text = "  indented  \nwindows\r\n\n\ttabs\t \n\nend   "
    assert minified(text, ctx) == "  indented\nwindows\n\n\ttabs\n\nend"


def test_a_run_of_repeated_lines_becomes_the_line_and_a_count_of_the_removed_copies(ctx: Context) -> None:
    text = f"start\n{LINE}\n{LINE}  \n{LINE}\n{LINE}\nend\n"
    assert minified(text, ctx) == f"start\n{LINE}\n[previous line repeated 3 times]\nend\n"


def test_runs_shorter_than_min_repeats_or_than_the_marker_stay(ctx: Context) -> None:
    two = f"{LINE}\n{LINE}"
    assert minified(two, ctx) == two
    assert minified(two, ctx, min_repeats=2) == f"{LINE}\n[previous line repeated 1 time]"
    short = "ok\n" * 10  # 9 copies of 3 characters are not worth a 33-character marker
    assert minified(short, ctx) == short
    assert minified("ok\n" * 20, ctx) == "ok\n[previous line repeated 19 times]\n"
    assert minified(f"{LINE}\n" * 9, ctx, min_repeats=10) == f"{LINE}\n" * 9


IDEMPOTENCE_CASES = [
    "[previous line repeated 2 times]\n" * 3,  # the marker text itself, repeated
    f"{LINE}\n{LINE}\n{LINE}\n" + "[previous line repeated 2 times]\n" * 4,
    "\x1b\x1b[0m[31m\x1b[0m" * 3 + "  \n" * 40,
    '{"a": [1, 2, 3],\n "b": "\\u00e9"}',
    "{not json  \n" + "}\n" * 50,
]


@pytest.mark.parametrize("text", IDEMPOTENCE_CASES)
def test_minifying_twice_is_minifying_once(text: str, ctx: Context) -> None:
    once = minified(text, ctx, min_repeats=2)
    assert minified(once, ctx, min_repeats=2) == once


def test_only_changed_tool_results_are_new_objects(ctx: Context) -> None:
    noisy = f"{LINE}   \n" * 3
    messages = [system(noisy), user(noisy), assistant(noisy), call("a"), result("a", "clean\n"), call("b")]
    messages += [result("b", noisy)]
    out = minify(messages, ctx)
    assert all(a is b for a, b in zip(out[:6], messages[:6], strict=True))
    assert out[6] == result("b", f"{LINE}\n[previous line repeated 2 times]\n")


def test_content_parts_and_legacy_function_results_are_minified(ctx: Context) -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    cached = {"type": "text", "text": "[1, 2]  \n", "cache_control": {"type": "ephemeral"}}
    out = minify([call("a"), result("a", [cached, image]), legacy_call("ls", {}), legacy_result("ls", "x  ")], ctx)
    assert out[1]["content"] == [{**cached, "text": "[1,2]"}, image]
    assert out[3] == legacy_result("ls", "x")


def test_the_input_is_not_mutated(ctx: Context) -> None:
    messages = [call("a"), result("a", parts('{"a": 1}')), call("b"), result("b", "x  \n")]
    snapshot = copy.deepcopy(messages)
    assert minify(messages, ctx) != snapshot
    assert messages == snapshot


examples = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
min_repeats = st.integers(2, 5)


@examples
@given(conversations(), min_repeats)
def test_properties_over_conversations(counter: TokenCounter, messages: list[Message], repeats: int) -> None:
    ctx = RecordingContext(model="gpt-4o", tokens=counter)
    out = keeps_the_invariants(lambda m: minify(m, ctx, min_repeats=repeats), messages)
    assert json.dumps(minify(out, ctx, min_repeats=repeats)) == json.dumps(out)  # idempotent
    for before, after in zip(messages, out, strict=True):
        if not is_tool_result(before):
            assert after is before
        assert len(text_of(after.get("content"))) <= len(text_of(before.get("content")))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@examples
@given(json_values, st.sampled_from([None, 0, 2, "\t"]), st.booleans(), st.sampled_from(["", "\n", "  \n "]))
def test_minify_never_changes_what_a_json_tool_result_says(
    counter: TokenCounter, value: Any, indent: int | str | None, ascii_only: bool, padding: str
) -> None:
    text = padding + json.dumps(value, indent=indent, ensure_ascii=ascii_only) + padding
    after = minified(text, RecordingContext(model="gpt-4o", tokens=counter))
    assert exact(after) == exact(text)
    try:
        compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:  # NaN or Infinity inside: Python-only JSON, left as it is
        assert after == text
    else:  # anything else that shrinks is rewritten
        shrinks = isinstance(value, dict | list) and len(compact) < len(text)
        assert after == (compact if shrinks else text)
