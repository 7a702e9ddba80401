from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from strategies import Context, Registry, StrategyError, TokenCounter
from strategies.messages import Message
from strategies.trim_bulky import REQUEST_TIMEOUT_SECONDS, SEARCH_TIMEOUT_SECONDS, TrimBulky, TrimBulkyParams
from tests.factories import assistant, call, parts, result, system, user
from tests.strategies.generators import conversations
from tests.strategies.harness import RecordingContext, apply, keeps_the_invariants

SEARCH = "Search results:\n1. A\n2. B\n3. C"
STUB = "[Search results (3 options) shown to the user; omitted]"


def trim(messages: list[Message], ctx: Context, **params: Any) -> list[Message]:
    return apply(TrimBulky(TrimBulkyParams(**params)), messages, ctx)


def chat(*replies: Any) -> list[Message]:
    """A question and an answer per reply, then a new question."""
    messages = [system("Be brief.")]
    for i, reply in enumerate(replies):
        messages += [user(f"q{i}"), {"role": "assistant", "content": reply}]
    return [*messages, user("next")]


def test_an_old_search_result_becomes_the_recipes_stub(ctx: Context) -> None:
    messages = chat(SEARCH, "ok", "ok")
    out = trim(messages, ctx)
    assert out == [*messages[:2], assistant(STUB), *messages[3:]]
    assert all(a is b for a, b in zip(out, messages, strict=True) if a != assistant(STUB))
    assert ctx.details["trimmed_messages"] == 1
    long = "Search results:\n" + "".join(f"{n}. Hotel {n}, 4 stars, 120 EUR a night\n" for n in range(1, 21))
    assert trim(chat(long, "ok", "ok"), ctx)[2] == assistant("[Search results (20 options) shown to the user; omitted]")
    assert ctx.details["trimmed_tokens"] > 200


def test_each_default_pattern_and_its_label(ctx: Context) -> None:
    replies = ["Train options for Monday\n09:10 ICE\n\n10:10 IC\n", "Quotes for Paris:\nA: 90 EUR\nB: 120 EUR"]
    out = trim(chat(*replies, "ok", "ok"), ctx)
    assert out[2]["content"] == "[Train options for Monday (2 options) shown to the user; omitted]"
    assert out[4]["content"] == "[Quotes for Paris (2 options) shown to the user; omitted]"


def test_the_last_keep_last_answered_pairs_are_kept(ctx: Context) -> None:
    messages = chat(SEARCH, SEARCH, SEARCH)
    assert [m["content"] for m in trim(messages, ctx)[2::2]] == [STUB, SEARCH, SEARCH]
    assert [m["content"] for m in trim(messages, ctx, keep_last=1)[2::2]] == [STUB, STUB, SEARCH]
    assert [m["content"] for m in trim(messages, ctx, keep_last=0)[2::2]] == [STUB, STUB, STUB]
    assert trim(messages, ctx, keep_last=3) == messages
    # The pending question is no pair: without it the same two replies are kept.
    assert trim(messages[:-1], ctx) == trim(messages, ctx)[:-1]


def test_only_matching_text_replies_are_trimmed(ctx: Context) -> None:
    talking = {"role": "assistant", "content": SEARCH, "tool_calls": [call("a")["tool_calls"][0]]}
    messages = [user("go"), talking, result("a", SEARCH), assistant("Here:\n" + SEARCH), user(SEARCH)]
    messages += [assistant("ok"), user("?"), assistant("ok"), user("?"), assistant("ok"), user("?")]
    assert trim(messages, ctx) == messages


def test_custom_patterns_search_the_first_line_only(ctx: Context) -> None:
    messages = chat("Found 3 flights:\nLH 1\nLH 2\nLH 3", "Fine.\nFound 2 flights:\nLH 1\nLH 2", "ok", "ok")
    out = trim(messages, ctx, patterns=[r"\d+ flights"])
    assert out[2]["content"] == "[Found 3 flights (3 options) shown to the user; omitted]"
    assert out[4] is messages[4]


def test_content_part_lists_keep_their_shape(ctx: Context) -> None:
    out = trim(chat(parts("Search results:\n1. A\n"), "ok", "ok"), ctx)
    assert out[2]["content"] == parts("[Search results (1 options) shown to the user; omitted]")


def test_a_first_line_alone_has_nothing_to_omit(ctx: Context) -> None:
    messages = chat("Search results: none", "ok", "ok", "Search results:\n\n  \n")
    assert trim(messages, ctx) == messages


def test_a_bad_regex_is_a_validation_error_naming_it() -> None:
    with pytest.raises(ValidationError, match=r"pattern '\(unclosed': invalid regular expression"):
        TrimBulkyParams(patterns=["^ok", "(unclosed"])
    with pytest.raises(StrategyError, match=r"patterns.*\(unclosed"):
        Registry([TrimBulky]).params_for("trim_bulky", {"patterns": ["(unclosed"]})
    with pytest.raises(ValidationError):
        TrimBulkyParams(keep_last=-1)


def test_the_input_is_not_mutated(ctx: Context) -> None:
    messages = chat(parts(SEARCH), SEARCH, "ok", "ok")
    snapshot = copy.deepcopy(messages)
    assert trim(messages, ctx) != snapshot
    assert json.dumps(messages) == json.dumps(snapshot)


# The generator's assistant text is random, so bulky replies are added after some user messages.
bulky = st.sampled_from([SEARCH, "Train options\n\n1\n2\n", "Quotes for X:\n" + "quote\n" * 20, "Search results:"])


@st.composite
def chats(draw: st.DrawFn) -> list[Message]:
    conversation = draw(conversations())
    messages: list[Message] = []
    for message in conversation[:-1]:
        messages.append(message)
        if message["role"] == "user" and draw(st.integers(0, 3)) > 0:
            messages.append(assistant(draw(bulky)))
    for _ in range(draw(st.integers(0, 3))):  # a few more answered turns, so keep_last has pairs to count
        messages += [user("more?"), assistant(draw(st.one_of(bulky, st.just("ok"))))]
    return [*messages, conversation[-1]]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chats(), st.integers(0, 2))
def test_invariants_hold(counter: TokenCounter, messages: list[Message], keep_last: int) -> None:
    ctx = RecordingContext(model="gpt-4o", tokens=counter)
    out = keeps_the_invariants(lambda m: trim(m, ctx, keep_last=keep_last), messages)
    changed = [(a, b) for a, b in zip(messages, out, strict=True) if a is not b]
    assert len(changed) == ctx.details["trimmed_messages"]
    for before, after in changed:
        assert before["role"] == "assistant" and after["content"].endswith(" shown to the user; omitted]")


def test_a_catastrophic_pattern_cannot_hold_the_worker(ctx: Context) -> None:
    # ^(a|aa)+$ backtracks exponentially on a run of a's that does not end the line; the search gives up,
    # counts as no match, and says so.
    strategy = TrimBulky(TrimBulkyParams(patterns=["^(a|aa)+$", "^Search results:"], keep_last=0))
    messages = [user("q"), assistant("a" * 40 + "!\n1. x\n2. y"), assistant("Search results:\n1. z"), user("q2")]
    out = apply(strategy, messages, ctx)
    assert out[:2] == messages[:2]
    assert out[2]["content"] == "[Search results (1 options) shown to the user; omitted]"
    assert ctx.details["pattern_timeouts"] == 1


def test_the_searches_of_one_request_stop_once_they_took_the_request_time_limit(ctx: Context) -> None:
    # Every search of this pattern on these lines times out: only a few run before the request's limit.
    messages: list[Message] = [user("go")]
    for _ in range(600):
        messages += [assistant("a" * 25 + "!"), user("more")]
    out = apply(TrimBulky(TrimBulkyParams(patterns=("^(a|a)+$",), keep_last=0)), messages, ctx)
    assert out == messages
    assert ctx.details["search_time_exhausted"] is True
    assert 1 <= ctx.details["pattern_timeouts"] <= REQUEST_TIMEOUT_SECONDS / SEARCH_TIMEOUT_SECONDS + 1
