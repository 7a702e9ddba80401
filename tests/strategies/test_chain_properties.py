"""design.md's invariants over random conversations and random chains of the registered strategies."""

from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import BUILTINS, Chain, Registry, StepSpec, TokenCounter, format_chain, parse_chain
from strategies.conversation import is_tool_result, text_of
from strategies.invariants import compaction_problems, pairing_problems
from strategies.messages import Message
from strategies.minify import minify_text
from tests.strategies.generators import conversations, steps
from tests.strategies.harness import RecordingContext

MARKERS = (
    "call compaction_expand with ref=",  # every stub for removed tool output
    "[previous line repeated ",
)
REGISTRY = Registry(BUILTINS)


chains = st.lists(steps, min_size=1, max_size=3).map(lambda specs: Chain.parse(format_chain(specs), REGISTRY))

examples = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run(chain: Chain, messages: list[Message], counter: TokenCounter) -> list[Message]:
    return chain.run(messages, RecordingContext(model="gpt-4o", tokens=counter)).messages


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
