"""Hypothesis generators of valid conversations, shared by the property tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from strategies import ModelLimits, StepSpec
from strategies.messages import Message
from tests.factories import assistant, legacy_call, legacy_result, parts, system, tool_call, user

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
def conversations(draw: st.DrawFn, max_parallel: int = 3) -> list[Message]:
    """Valid conversations; an assistant message makes up to max_parallel calls at once."""
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
            for j in range(draw(st.integers(1, max_parallel))):
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


@st.composite
def long_assistant_texts(draw: st.DrawFn, max_parallel: int = 3) -> list[Message]:
    """Valid conversations whose assistant texts may be long too (the model's reasoning, not only its one-liners)."""
    messages = draw(conversations(max_parallel))
    out = []
    for message in messages:
        if message["role"] == "assistant" and isinstance(message.get("content"), str) and draw(st.booleans()):
            text = draw(long_texts())
            # An assistant message with neither text nor calls is no valid message.
            message = {**message, "content": text or (None if "tool_calls" in message else ".")}
        out.append(message)
    return out


# Small model windows, so that budget strategies cut in conversations of a few thousand tokens.
model_limits = st.builds(ModelLimits, context_window=st.integers(1000, 20_000), max_output=st.integers(1, 20_000))


# Strategy steps with random parameters, for the property tests of chains.
def without_none(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


# shorten_tools' epoch and min_gain, and fit's and middle_out's room (strategies.epochs).
epoch_calls = st.sampled_from([0, 0, 1, 2, 20])
rooms = st.sampled_from([0, 0, 50, 400, 5000])
min_gains = st.sampled_from([0.0, 0.0, 0.35, 1.0])
paces = st.booleans()

shorten_tools = st.builds(
    dict,
    epoch=epoch_calls,
    min_gain=min_gains,
    pace=paces,
    full_tool_calls=st.integers(0, 3),
    full_tool_outputs=st.integers(0, 3),
    max_tool_calls=st.integers(0, 8),
    max_tool_outputs=st.one_of(st.none(), st.integers(0, 8)),
    max_tool_chars=st.sampled_from([0, 0, 500, 2000, 100_000]),
    short_string_length=st.one_of(st.integers(1, 20), st.integers(1, 300)),
).map(lambda p: StepSpec("shorten_tools", without_none(p)))
prune_tool_outputs = st.builds(dict, max_chars=st.integers(0, 3000)).map(lambda p: StepSpec("prune_tool_outputs", p))
window = st.builds(dict, budget=st.integers(1, 3000), low_water=st.floats(0.05, 1.0)).map(
    lambda p: StepSpec("window", p)
)
fit = st.builds(
    dict,
    total=st.one_of(st.none(), st.integers(0, 5000)),
    room=st.one_of(st.none(), rooms),
).map(lambda p: StepSpec("fit", without_none(p)))
middle_out = st.builds(
    dict,
    total=st.one_of(st.none(), st.integers(0, 5000)),
    max_messages=st.one_of(st.none(), st.integers(1, 30)),
    room=st.one_of(st.none(), rooms),
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
mask = st.builds(
    dict,
    keep=st.integers(0, 4),
    epoch=epoch_calls,
    min_gain=min_gains,
    pace=paces,
    max_chars=st.one_of(st.none(), st.integers(1, 500)),
    inputs=st.booleans(),
    text_chars=st.sampled_from([1, 200, 1000]),
).map(lambda p: StepSpec("mask", without_none(p)))
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
    mask,
)
