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
from tests.factories import assistant, legacy_call, legacy_result, parts, system, tool_call, user

MARKERS = ("Truncated (", "[... output truncated ...]")
REGISTRY = Registry(BUILTINS)

# Lone surrogates are left out: orjson, which the invariant checks use, cannot encode them.
characters = st.characters(exclude_categories=["Cs"])
words = st.text(characters, max_size=30)
said = st.text(characters, min_size=1, max_size=30)  # an assistant says something


@st.composite
def long_texts(draw: st.DrawFn) -> str:
    """Tool output from empty to a few thousand characters, built from a random seed so it draws fast."""
    seed = draw(st.text(characters, min_size=1, max_size=12))
    size = draw(st.one_of(st.integers(0, 80), st.integers(0, 3000)))
    return (seed * (size // len(seed) + 1))[:size]


@st.composite
def arguments(draw: st.DrawFn) -> Any:
    """A dict with short and long strings (dumped as JSON by the factory), or an argument string that is no JSON."""
    if draw(st.booleans()):
        return {"path": draw(words), "content": draw(long_texts()), "lines": [draw(long_texts()), 3, None]}
    return '{"broken": "' + draw(long_texts())


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = [system(draw(words))] if draw(st.booleans()) else []
    messages.append(user(draw(words)))
    reuse_ids = draw(st.booleans())  # some models send call_0, call_1 ... every turn
    fresh = 0
    for kind in draw(st.lists(st.sampled_from(["user", "assistant", "tools", "tools", "legacy"]), max_size=12)):
        if kind == "user":
            messages.append(user(draw(words)))
        elif kind == "assistant":
            messages.append(assistant(draw(said)))
        elif kind == "legacy":
            messages.append(legacy_call("run", draw(arguments())))
            messages.append(legacy_result("run", draw(long_texts())))
        else:
            ids = []
            for j in range(draw(st.integers(1, 3))):
                ids.append(f"call_{j}" if reuse_ids else f"call_{fresh}")
                fresh += 1
            text = draw(st.one_of(st.none(), said))
            messages.append(
                {
                    "role": "assistant",
                    "content": text,
                    "tool_calls": [tool_call(i, "run", draw(arguments())) for i in ids],
                }
            )
            for i in ids:
                output = draw(long_texts())
                messages.append(
                    {"role": "tool", "tool_call_id": i, "content": parts(output) if draw(st.booleans()) else output}
                )
    messages.append(user(draw(words)))
    return messages


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
# shorten_tools has the most paths (budget, three tiers, arguments), so it is drawn most often.
steps = st.one_of(st.just(StepSpec("none")), shorten_tools, shorten_tools, prune_tool_outputs)
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
    for message in run(chain, messages, counter):
        text = text_of(message.get("content"))
        if is_tool_result(message) and text not in originals:
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
