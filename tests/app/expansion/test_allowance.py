"""What a model's expand calls may cost (app.expansion.allowance), end to end through the proxy: a model that calls
the tool thousands of times in one answer, rounds that would pass the window, retries of the same turn. Each shape
is the red-team finding's own (issue 23, finding 1).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from app import Settings, create_app
from strategies import Encodings, TokenCounter
from strategies.refs import EXPAND_TOOL, refs_in
from tests.app.expansion.test_loop import IN_EPOCHS, expand_call, offered, oldest_stub, sdk
from tests.factories import agent_loop, assistant, user
from tests.support.metrics import scrape
from tests.support.scripted_model import ScriptedModel, Turn
from tests.support.servers import LoopbackServer

HEADERS = {"X-Compaction-Strategies": "mask(keep=1,epoch=0,min_gain=0)"}
OUTPUT_CHARS = 2000


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    scripted = ScriptedModel(lambda payload: Turn(text="Done."))
    with LoopbackServer(scripted.app) as server:
        scripted.url = server.url  # type: ignore[attr-defined]
        yield scripted


def proxy_for(model: ScriptedModel, **overrides: Any) -> LoopbackServer:
    settings = Settings(upstream_base_url=f"{model.url}/v1", **overrides)  # type: ignore[attr-defined]
    return LoopbackServer(create_app(settings), settings)


def flood(count: int, *, distinct: bool = False) -> Any:
    """A model in a loop: whenever the tool is offered it calls it `count` times at once, on one ref (or on as many
    line ranges of it), and answers in words once it is not offered.
    """

    def script(payload: dict[str, Any]) -> Turn:
        ref = oldest_stub(payload["messages"])
        if not offered(payload) or ref is None:
            return Turn(text="Done looking.")
        lines = [{"start_line": i + 1, "end_line": i + 1} if distinct else {} for i in range(count)]
        return Turn(calls=[expand_call(ref, f"call_x{i}", **lines[i]) for i in range(count)])

    return script


def expand_results(payload: dict[str, Any]) -> list[dict[str, Any]]:
    calls = {
        c["id"] for m in payload["messages"] for c in m.get("tool_calls") or [] if c["function"]["name"] == EXPAND_TOOL
    }
    return [m for m in payload["messages"] if m["role"] == "tool" and m["tool_call_id"] in calls]


def size(payload: dict[str, Any]) -> int:
    return len(json.dumps(payload))


@pytest.mark.parametrize("count", [2000, 8000])
def test_thousands_of_parallel_calls_on_one_ref_are_answered_once(model: ScriptedModel, count: int) -> None:
    model.script = flood(count)
    conversation = agent_loop(30, OUTPUT_CHARS)
    with proxy_for(model) as proxy:
        raw = sdk(proxy).chat.completions.with_raw_response.create(
            model="gpt-4o",
            messages=conversation,  # type: ignore[arg-type]
            extra_headers=HEADERS,
        )
        samples = scrape(proxy.url)
    assert raw.parse().choices[0].message.content == "Done looking."
    assert raw.headers["x-compaction-expansions"] == "3"
    first, *rounds = model.received
    assert len(rounds) == 3
    for payload in rounds:
        # One call answered per round (the 1,999 others were the same call); the first with the original, the
        # next rounds with a pointer to it.
        assert len(expand_results(payload)) == len(rounds[: rounds.index(payload) + 1])
        assert size(payload) - size(first) < 3 * OUTPUT_CHARS + 3000
    assert samples.get("compaction_proxy_expand_calls_total", result="resolved") == 1
    assert samples.get("compaction_proxy_expand_calls_total", result="repeated") == 2
    assert samples.get("compaction_proxy_expand_calls_total", result="left_out") == 3 * (count - 1)


def test_distinct_calls_past_expand_max_calls_are_left_out_of_the_round(model: ScriptedModel) -> None:
    model.script = flood(2000, distinct=True)
    with proxy_for(model, expand_max_rounds=1) as proxy:
        sdk(proxy).chat.completions.create(
            model="gpt-4o",
            messages=agent_loop(30, OUTPUT_CHARS),  # type: ignore[arg-type]
            extra_headers=HEADERS,
        )
    calls = [m for m in model.received[1]["messages"] if m.get("tool_calls")][-1]["tool_calls"]
    assert len(calls) == 8 == len(expand_results(model.received[1]))  # expand_max_calls, each with its result
    assert [json.loads(c["function"]["arguments"])["start_line"] for c in calls] == list(range(1, 9))


def test_a_flooded_round_is_remembered_with_its_bound_and_the_next_turn_compacts_as_usual(
    model: ScriptedModel,
) -> None:
    first = agent_loop(30, OUTPUT_CHARS)
    with proxy_for(model) as proxy:
        client = sdk(proxy)
        client.chat.completions.create(model="gpt-4o", messages=first, extra_headers=IN_EPOCHS)  # type: ignore[arg-type]
        baseline = model.received[0]
        model.script = flood(8000, distinct=True)
        model.received.clear()
        answer = client.chat.completions.create(model="gpt-4o", messages=first, extra_headers=IN_EPOCHS)  # type: ignore[arg-type]
        model.script = lambda payload: Turn(text="Done.")
        model.received.clear()
        second = [*first, assistant(answer.choices[0].message.content or ""), user("Go on.")]
        client.chat.completions.create(model="gpt-4o", messages=second, extra_headers=IN_EPOCHS)  # type: ignore[arg-type]
    [turn_two] = model.received
    shown = expand_results(turn_two)
    # The rounds come back with their bound (8 calls each) and the conversation as it was compacted before them:
    # every message of the first turn's request, then its rounds' calls and results, then the new turn.
    assert 0 < len(shown) <= 3 * 8
    rounds = [
        m for m in turn_two["messages"] if any(c["function"]["name"] == EXPAND_TOOL for c in m.get("tool_calls") or [])
    ]
    assert len(turn_two["messages"]) == len(baseline["messages"]) + len(rounds) + len(shown) + 2


def test_rounds_that_would_pass_the_window_get_a_tool_error_and_no_request_passes_it(model: ScriptedModel) -> None:
    window, reserve = 16_000, 1000
    counter = TokenCounter(Encodings())

    def greedy(payload: dict[str, Any]) -> Turn:
        if not offered(payload):
            return Turn(text="Answered from what fit.")
        refs = sorted({r for m in payload["messages"] if m["role"] == "tool" for r in refs_in(m["content"] or "")})
        return Turn(calls=[expand_call(ref, f"call_x{i}") for i, ref in enumerate(refs[:8])])

    model.script = greedy
    models = {"small-model": {"context_window": window, "max_output": reserve}}
    with proxy_for(model, models=models) as proxy:
        completion = sdk(proxy).chat.completions.create(
            model="small-model",
            messages=agent_loop(40, 4000),  # type: ignore[arg-type]
            max_tokens=reserve,
            extra_headers=HEADERS,
        )
        samples = scrape(proxy.url)
    assert completion.choices[0].message.content == "Answered from what fit."
    assert len(model.received) == 4
    for payload in model.received:
        prompt = counter.count_messages(payload["messages"], "small-model")
        assert prompt + reserve <= window
    assert samples.get("compaction_proxy_expand_calls_total", result="refused") > 0
    refused = [m["content"] for p in model.received for m in expand_results(p) if m["content"].startswith("Error:")]
    assert refused and "fit in the context now" in refused[0]


def test_retries_of_the_same_turn_are_remembered_once(model: ScriptedModel) -> None:
    def reader(payload: dict[str, Any]) -> Turn:
        last = payload["messages"][-1]
        if last["role"] == "tool" and last["tool_call_id"].startswith("call_x"):
            return Turn(text="Found it.")
        ref = oldest_stub(payload["messages"])
        if ref is not None and offered(payload) and not expand_results(payload):
            return Turn(calls=[expand_call(ref)])
        return Turn(text="Done.")

    model.script = reader
    first = agent_loop(6, OUTPUT_CHARS)
    with proxy_for(model) as proxy:
        client = sdk(proxy)
        for _ in range(5):  # the client retries the same turn (a timeout on its side, say)
            client.chat.completions.create(model="gpt-4o", messages=first, extra_headers=IN_EPOCHS)  # type: ignore[arg-type]
        model.received.clear()
        second = [*first, assistant("Found it."), user("Go on.")]
        client.chat.completions.create(model="gpt-4o", messages=second, extra_headers=IN_EPOCHS)  # type: ignore[arg-type]
    [turn_two] = model.received
    assert len(expand_results(turn_two)) == 1


def test_an_original_larger_than_what_is_free_comes_in_the_first_lines_that_fit(model: ScriptedModel) -> None:
    # A 2k-token-class local window: the oldest result (20,000 characters, about 5,000 tokens) is asked for whole,
    # and about 3,000 are free. It comes as its first lines, with the note saying where to read on, within the window.
    window, reserve = 4096, 256
    counter = TokenCounter(Encodings())
    messages = [*agent_loop(1, 20_000), *agent_loop(4, 300)[2:]]
    first_ref: list[str] = []

    def once(payload: dict[str, Any]) -> Turn:
        ref = oldest_stub(payload["messages"])
        if not offered(payload) or ref is None or expand_results(payload):
            return Turn(text="Read what fit.")
        first_ref.append(ref)
        return Turn(calls=[expand_call(ref)])

    model.script = once
    models = {"local-model": {"context_window": window, "max_output": 4096}}
    with proxy_for(model, models=models) as proxy:
        completion = sdk(proxy).chat.completions.create(
            model="local-model",
            messages=messages,  # type: ignore[arg-type]
            max_tokens=reserve,
            extra_headers=HEADERS,
        )
    assert completion.choices[0].message.content == "Read what fit."
    assert len(model.received) == 2
    (part,) = [m["content"] for m in expand_results(model.received[1])]
    assert part.startswith(f'[ref="{first_ref[0]}": lines 1-') and "start_line=" in part.split("\n", 1)[0]
    assert messages[3]["content"].startswith(part.split("\n", 1)[1])  # the original's first lines, as they are
    assert len(part) > 2000
    for payload in model.received:
        assert counter.count_messages(payload["messages"], "local-model") + reserve <= window
