"""Epochs end to end: a growing agent conversation through the proxy with the openai SDK. Between two jumps the
upstream receives requests that extend each other byte for byte, and X-Compaction-Prefix says so; the same rule
without epochs rewrites the prefix on almost every request.
"""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

import httpx
import openai

from strategies.epochs import GEOMETRIC
from tests.factories import Message, agent_loop, client_requests, system
from tests.support.servers import LoopbackServer
from tests.support.upstream import StandInUpstream

RULE = "shorten_tools(max_tool_chars=0,full_tool_outputs=3,max_tool_calls=12"


def session() -> list[Message]:
    """A 40-call agent session with a system prompt of its own: the proxy keeps prefix state across tests."""
    return [system(f"You are a coding agent. {uuid.uuid4().hex}"), *agent_loop(40, 1500)[1:]]


def replay(
    client: openai.OpenAI, upstream: StandInUpstream, chain: str, conversation: list[Message]
) -> tuple[list[str], list[list[Message]]]:
    """Send every request of the conversation; the prefix header and the forwarded messages of each."""
    outcomes, forwarded = [], []
    for request in client_requests(conversation):
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o",
            messages=request,  # type: ignore[arg-type]
            extra_headers={"X-Compaction-Strategies": chain},
        )
        raw.parse()
        outcomes.append(raw.headers["x-compaction-prefix"])
        forwarded.append(upstream.last().json()["messages"])
    return outcomes, forwarded


def extends(previous: list[Message], current: list[Message]) -> bool:
    return [json.dumps(m) for m in current[: len(previous)]] == [json.dumps(m) for m in previous]


def test_with_epochs_the_forwarded_requests_extend_each_other_between_jumps(
    client: openai.OpenAI, upstream: StandInUpstream
) -> None:
    conversation = session()
    outcomes, forwarded = replay(client, upstream, RULE + ",epoch=8)", conversation)
    assert outcomes[0] == "new"
    for previous, current, outcome in zip(forwarded, forwarded[1:], outcomes[1:], strict=False):
        assert outcome == ("extends" if extends(previous, current) else "breaks")
    breaks = outcomes.count("breaks")
    assert 1 <= breaks <= 40 // 8  # at most one jump per epoch of 8 tool calls
    assert len(json.dumps(forwarded[-1])) < len(json.dumps(conversation)) / 2  # and it did compact


def test_without_epochs_the_same_rule_breaks_the_prefix_on_almost_every_request(
    client: openai.OpenAI, upstream: StandInUpstream
) -> None:
    outcomes, _ = replay(client, upstream, RULE + ",epoch=0,min_gain=0)", session())
    assert outcomes.count("breaks") > 25


def one_character_chat(n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": "a"} for i in range(n)] + [
        {"role": "user", "content": "a"}
    ]


def steps(proxy: LoopbackServer, chain: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    response = httpx.post(
        f"{proxy.url}/compact",
        json={"model": "gpt-4o", "messages": messages},
        headers={"X-Compaction-Strategies": chain},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_fit_and_middle_out_on_60000_one_character_messages_cut_a_bounded_number_of_times(
    proxy: LoopbackServer,
) -> None:
    messages = one_character_chat(60_000)  # about 2 MB
    for chain in ("fit(total=1200)", "middle_out(total=1200)"):  # the issue sent budget=, its old name
        answer = steps(proxy, chain, messages)
        [step] = answer["steps"]
        # Each cut leaves half the total free, so there is one per 600 tokens of growth at most; each costs what
        # it keeps (strategies.layout), not the conversation so far.
        assert answer["tokens_after"] <= 1200
        assert 0 < step["limit_cuts"] <= answer["tokens_before"] // 600 + 1
        assert step["evaluated"] == 0


def test_shorten_tools_past_the_window_evaluates_its_rule_a_logarithmic_number_of_times(
    proxy: LoopbackServer,
) -> None:
    calls = []
    for i in range(16_000):  # 32,000 messages of one-character results, past gpt-4o's window
        calls.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})  # fmt: skip
        calls.append({"role": "tool", "tool_call_id": f"c{i}", "content": "a"})
    answer = steps(proxy, "shorten_tools", [{"role": "user", "content": "task"}, *calls])
    [step] = answer["steps"]
    ends = 16_000
    assert step["evaluated"] <= GEOMETRIC * (math.log(ends) + 1)
    assert answer["tokens_after"] <= 128_000 - 16_384 - 2_560  # within the window less the output reserve
