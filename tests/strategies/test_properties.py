"""design.md's invariants over random conversations and random chains of the registered strategies."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import BUILTINS, Chain, Context, Registry, StepSpec, TokenCounter, format_chain, parse_chain
from strategies.base import Message
from strategies.content import is_tool_result, text_of
from strategies.invariants import compaction_problems, pairing_problems
from strategies.minify import minify_text
from tests.strategies.generators import conversations

MARKERS = (
    "Truncated (",
    "[... output truncated ...]",
    "[cleared: result of tool ",
    "[previous line repeated ",
    "[same output as tool call ",
)
REGISTRY = Registry(BUILTINS)


def without_none(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


shorten_tools = st.builds(
    dict,
    full_tool_calls=st.integers(0, 3),
    full_tool_outputs=st.integers(0, 3),
    max_tool_calls=st.integers(0, 8),
    max_tool_outputs=st.one_of(st.none(), st.integers(0, 8)),
    max_tool_chars=st.sampled_from([0, 0, 500, 2000, 100_000]),
    short_string_length=st.one_of(st.integers(1, 20), st.integers(1, 300)),
).map(lambda p: StepSpec("shorten_tools", without_none(p)))
prune_tool_outputs = st.integers(0, 3000).map(lambda n: StepSpec("prune_tool_outputs", {"max_chars": n}))
window = st.builds(dict, budget=st.integers(1, 3000), low_water=st.floats(0.05, 1.0)).map(
    lambda p: StepSpec("window", p)
)
fit = st.one_of(st.none(), st.integers(0, 5000)).map(lambda t: StepSpec("fit", without_none({"total": t})))
middle_out = st.builds(
    dict, budget=st.one_of(st.none(), st.integers(0, 5000)), max_messages=st.one_of(st.none(), st.integers(1, 30))
).map(lambda p: StepSpec("middle_out", without_none(p)))
clear_tool_uses = st.builds(
    dict,
    trigger=st.integers(0, 3000),
    keep=st.integers(0, 4),
    clear_at_least=st.integers(0, 500),
    exclude_tools=st.sampled_from([[], ["run"]]),
    clear_tool_inputs=st.booleans(),
).map(lambda p: StepSpec("clear_tool_uses", p))
trim_bulky = st.integers(0, 3).map(lambda n: StepSpec("trim_bulky", {"keep_last": n}))
minify = st.integers(2, 4).map(lambda n: StepSpec("minify", {"min_repeats": n}))
dedupe = st.integers(0, 300).map(lambda n: StepSpec("dedupe", {"min_chars": n}))
# shorten_tools has the most paths (budget, three tiers, arguments), so it is drawn most often.
steps = st.one_of(
    st.just(StepSpec("none")),
    shorten_tools,
    shorten_tools,
    prune_tool_outputs,
    window,
    fit,
    middle_out,
    clear_tool_uses,
    trim_bulky,
    minify,
    dedupe,
)
chains = st.lists(steps, min_size=1, max_size=3).map(lambda specs: Chain.parse(format_chain(specs), REGISTRY))

examples = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run(chain: Chain, messages: list[Message], counter: TokenCounter) -> list[Message]:
    return chain.run(messages, Context(model="gpt-4o", tokens=counter)).messages


@examples
@given(conversations(), chains)
def test_compaction_keeps_pairs_valid_and_pinned_messages_intact(
    counter: TokenCounter, messages: list[Message], chain: Chain
) -> None:
    assert pairing_problems(messages) == []  # the generator only builds valid conversations
    after = run(chain, messages, counter)
    assert compaction_problems(messages, after) == []
    assert pairing_problems(after) == []


@examples
@given(conversations(), chains)
def test_the_input_is_never_mutated(counter: TokenCounter, messages: list[Message], chain: Chain) -> None:
    snapshot = copy.deepcopy(messages)
    run(chain, messages, counter)
    assert messages == snapshot
    assert json.dumps(messages) == json.dumps(snapshot)


@examples
@given(conversations(), chains)
def test_the_same_input_gives_the_same_bytes(counter: TokenCounter, messages: list[Message], chain: Chain) -> None:
    assert json.dumps(run(chain, messages, counter)) == json.dumps(run(chain, copy.deepcopy(messages), counter))


@examples
@given(conversations(), chains)
def test_a_shortened_tool_result_says_so(counter: TokenCounter, messages: list[Message], chain: Chain) -> None:
    originals = {text_of(m.get("content")) for m in messages if is_tool_result(m)}
    # minify's rewrites lose nothing (compact JSON, escape codes, trailing spaces), so they carry no marker.
    lossless = {minify_text(text, repeats) for text in originals for repeats in (2, 3, 4)}
    for message in run(chain, messages, counter):
        text = text_of(message.get("content"))
        if is_tool_result(message) and text not in originals and text not in lossless:
            assert any(marker in text for marker in MARKERS), text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
step_specs = st.builds(StepSpec, identifiers, st.dictionaries(identifiers, json_values, max_size=4))


@settings(max_examples=200)
@given(st.lists(step_specs, min_size=1, max_size=4))
def test_format_chain_round_trips_any_json_values(specs: list[StepSpec]) -> None:
    formatted = format_chain(specs)
    assert formatted.isascii()
    assert parse_chain(formatted) == specs
