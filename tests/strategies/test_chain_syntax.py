from __future__ import annotations

import pytest

from strategies import ChainSyntaxError, StepSpec, format_chain, parse_chain


def test_the_documented_example() -> None:
    assert parse_chain("shorten_tools(full_tool_outputs=3, max_tool_chars=0),prune_tool_outputs") == [
        StepSpec("shorten_tools", {"full_tool_outputs": 3, "max_tool_chars": 0}),
        StepSpec("prune_tool_outputs"),
    ]


def test_values_are_json_literals() -> None:
    [step] = parse_chain('s(a=[1, "x"], b="p, q(r)", c=true, d=false, e=null, f={"k": [1, 2]}, g=-1.5)')
    assert step.params == {
        "a": [1, "x"],
        "b": "p, q(r)",
        "c": True,
        "d": False,
        "e": None,
        "f": {"k": [1, 2]},
        "g": -1.5,
    }


def test_bare_words_are_strings() -> None:
    [step] = parse_chain("s(mode=fast, label=hello world, empty=)")
    assert step.params == {"mode": "fast", "label": "hello world", "empty": ""}


def test_whitespace_around_names_keys_and_values_is_ignored() -> None:
    assert parse_chain("  none ,  shorten_tools ( full_tool_outputs = 3 ) , a() ") == [
        StepSpec("none"),
        StepSpec("shorten_tools", {"full_tool_outputs": 3}),
        StepSpec("a"),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty chain; use 'none'"),
        ("   ", "empty chain; use 'none'"),
        ("none,", "stray comma"),
        ("none,,shorten_tools", "stray comma"),
        ("s(a=1", "missing ')'"),
        ("s(a=1))", "unbalanced ')'"),
        ("s(a=[1)", "unbalanced ')'"),
        ('s(a="x)', "unterminated string"),
        ("s(a)", "expected key=value in s(...), got 'a'"),
        ("s(=1)", "expected key=value"),
        ("s(a=1, a=2)", "parameter 'a' given twice to 's'"),
        ("s(a=1) t", "text after the closing parenthesis of 's'"),
        ("s(a=1)t", "text after the closing parenthesis of 's'"),
        ("9lives", "invalid strategy name '9lives'"),
        ("shorten-tools", "invalid strategy name 'shorten-tools'"),
        ("fit(total=" + "[" * 10_000 + "]" * 10_000 + ")", "longer than 4096 characters"),
        ("fit(total=" + "[" * 9 + "]" * 9 + ")", "nested more than 8 deep"),
        (",".join(["none"] * 17), "17 steps; a chain has at most 16"),
    ],
)
def test_errors_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ChainSyntaxError) as excinfo:
        parse_chain(text)
    assert message in str(excinfo.value)


@pytest.mark.parametrize(
    "text",
    [
        "none",
        "shorten_tools(full_tool_outputs=3, max_tool_chars=0),prune_tool_outputs(max_chars=10)",
        's(a=[1, "x,y"], b="p(q)", c=true, d=null, e={"k": "v\\"w"}, f=bare word)',
        's(label="café ☕")',
    ],
)
def test_format_chain_round_trips_parse_chain(text: str) -> None:
    steps = parse_chain(text)
    formatted = format_chain(steps)
    assert parse_chain(formatted) == steps
    assert formatted.isascii()


def test_format_chain_is_compact() -> None:
    steps = parse_chain(' shorten_tools ( full_tool_outputs = 3, exclude = [ "a" ] ) , none ')
    assert format_chain(steps) == 'shorten_tools(full_tool_outputs=3,exclude=["a"]),none'
