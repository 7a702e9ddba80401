"""Hypothesis generators of valid conversations, shared by the property tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from strategies.base import Message
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
