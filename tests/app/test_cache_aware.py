"""Epochs end to end: a growing agent conversation through the proxy with the openai SDK. Between two jumps the
upstream receives requests that extend each other byte for byte, and X-Compaction-Prefix says so; the same rule
without epochs rewrites the prefix on almost every request.
"""

from __future__ import annotations

import json
import uuid

import openai

from tests.factories import Message, agent_loop, client_requests, system
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
