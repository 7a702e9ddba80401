from __future__ import annotations

from dataclasses import replace

import pytest

from bench.notes.stand_in import DictNotes, StandInSummariser
from strategies import BUILTINS, Chain, ChainSyntaxError, Context, Encodings, Registry, StrategyError
from tests.factories import agent_loop
from tests.strategies.harness import linear_in_parallel_calls


@pytest.fixture
def registry() -> Registry:
    return Registry(BUILTINS)


def test_parse_builds_each_step_with_configured_then_request_parameters(registry: Registry) -> None:
    configured = {"shorten_tools": {"max_tool_chars": 0, "full_tool_outputs": 9}}
    chain = Chain.parse("shorten_tools( full_tool_outputs=2 ), prune_tool_outputs", registry, configured)
    assert [s.name for s in chain.steps] == ["shorten_tools", "prune_tool_outputs"]
    assert (chain.steps[0].params.max_tool_chars, chain.steps[0].params.full_tool_outputs) == (0, 2)
    assert chain.spec == "shorten_tools(full_tool_outputs=2),prune_tool_outputs"


def test_parse_raises_syntax_and_strategy_errors(registry: Registry) -> None:
    with pytest.raises(ChainSyntaxError):
        Chain.parse("shorten_tools(", registry)
    with pytest.raises(StrategyError):
        Chain.parse("no_such_strategy", registry)


def test_run_applies_the_steps_in_order_and_counts_tokens(registry: Registry, ctx: Context) -> None:
    messages = agent_loop(6, 3000)
    chain = Chain.parse(
        "shorten_tools(max_tool_chars=0,full_tool_outputs=2,max_tool_calls=4,epoch=0),prune_tool_outputs(max_chars=500)",
        registry,
    )
    result = chain.run(messages, ctx, trace=True)
    expected = chain.steps[1].apply(chain.steps[0].apply(messages, ctx).messages, ctx).messages
    assert result.messages == expected
    assert (result.tokens_before, result.tokens_after) == (ctx.count(messages), ctx.count(expected))
    assert [s.strategy for s in result.steps] == ["shorten_tools", "prune_tool_outputs"]
    assert result.steps[0].tokens_before == result.tokens_before
    assert result.steps[0].tokens_after == result.steps[1].tokens_before > result.steps[1].tokens_after
    assert result.steps[1].tokens_after == result.tokens_after


def test_run_without_trace_still_counts_the_result(registry: Registry, ctx: Context) -> None:
    messages = agent_loop(3, 5000)
    result = Chain.parse("prune_tool_outputs(max_chars=10)", registry).run(messages, ctx)
    assert result.steps == []
    assert result.tokens_after == ctx.count(result.messages) < result.tokens_before


def test_none_forwards_the_messages_unchanged(registry: Registry, ctx: Context) -> None:
    messages = agent_loop(3, 5000)
    result = Chain.parse("none", registry).run(messages, ctx)
    assert result.messages == messages
    assert result.tokens_before == result.tokens_after == ctx.count(messages)


# Every strategy, with parameters that make it look at every call, and the default chain (app.settings).
PARALLEL_CHAINS = [
    "minify,mask,window",
    "none",
    "minify",
    "dedupe(min_chars=0)",
    "mask(keep=1)",
    "window(budget=500)",
    "fit(total=2000)",
    "middle_out(total=2000)",
    "middle_out(max_messages=10)",
    "shorten_tools(max_tool_chars=0,full_tool_outputs=0,max_tool_calls=1000000,short_string_length=5)",
    "prune_tool_outputs(max_chars=10)",
    "clear_tool_uses(trigger=0,keep=1,clear_tool_inputs=true)",
    "trim_bulky(keep_last=0)",
    "notes(budget=500)",
]


def test_every_strategy_is_tried_on_parallel_calls(registry: Registry) -> None:
    assert {name for chain in PARALLEL_CHAINS for name in (s.split("(")[0] for s in chain.split(","))} >= set(
        registry.names()
    )


@pytest.mark.parametrize("spec", PARALLEL_CHAINS)
def test_thousands_of_parallel_calls_cost_work_linear_in_the_calls(
    registry: Registry, shared_encodings: Encodings, spec: str
) -> None:
    chain = Chain.parse(spec, registry)
    notes = {"summariser": StandInSummariser(), "notes_cache": DictNotes()}
    linear_in_parallel_calls(lambda m, ctx: chain.run(m, ctx, trace=True).messages, shared_encodings, **notes)


def test_watch_sees_each_step_that_ran_with_its_messages_in_and_out_a_fallbacks_too(
    registry: Registry, ctx: Context
) -> None:
    messages = agent_loop(3, 5000)
    seen: list[tuple[str, list[object], list[object]]] = []
    # mask cannot run where the expand tool cannot be offered: its fallback (dedupe) runs instead, and is watched.
    chain = Chain.parse("prune_tool_outputs(max_chars=10),mask", registry)
    result = chain.run(messages, replace(ctx, expandable=False), watch=lambda *step: seen.append(step))
    assert [name for name, _, _ in seen] == ["prune_tool_outputs", "dedupe"]
    assert seen[0][1] is messages and seen[1][1] is seen[0][2] and seen[1][2] is result.messages
