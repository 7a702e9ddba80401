"""Work a request can buy is bounded and grows about linearly with it (issue 11's attacks, sent as written):
the strategies' own counters of what they did, through POST /compact. Times are the benchmark's business
(python -m bench.complexity); these show the counts that make them near-linear.
"""

from __future__ import annotations

import math
from typing import Any

import httpx

from strategies.epochs import GEOMETRIC
from tests.support.servers import LoopbackServer


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
