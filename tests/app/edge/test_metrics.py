"""/metrics in Prometheus' text format, moving with the traffic; one registry per app."""

from __future__ import annotations

import httpx
import openai

from tests.app.conftest import ProxyFactory
from tests.factories import agent_loop
from tests.support.metrics import scrape
from tests.support.servers import closed_port
from tests.support.upstream import StandInUpstream

HI = [{"role": "user", "content": "hi"}]
PROMPT_TOKENS = "compaction_proxy_prompt_tokens_total"
CHAT = "/v1/chat/completions"


def test_metrics_move_with_traffic(start_proxy: ProxyFactory, upstream: StandInUpstream) -> None:
    with start_proxy() as proxy:
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-test", max_retries=0)
        idle = scrape(proxy.url)

        heavy = client.chat.completions.with_raw_response.create(
            model="gpt-4o",
            messages=agent_loop(60, output_chars=4000),
            extra_headers={"X-Compaction-Strategies": "shorten_tools(max_tool_chars=0)"},
        )
        list(client.chat.completions.create(model="gpt-4o", messages=HI, stream=True))
        light = client.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=HI, extra_headers={"X-Compaction-Strategies": "prune_tool_outputs,none"}
        )
        httpx.post(f"{proxy.url}{CHAT}", content=b"not json")
        client.models.list()
        httpx.get(f"{proxy.url}/no/such/path")
        samples = scrape(proxy.url)

    for name in ("compaction_proxy_upstream_errors_total", "compaction_proxy_fallbacks_total"):
        assert name in idle.names()  # present at zero before anything happened
    assert idle.get("compaction_proxy_requests_total", route=CHAT, status="200") == 0

    assert samples.get("compaction_proxy_requests_total", route=CHAT, status="200") == 3
    assert samples.get("compaction_proxy_requests_total", route=CHAT, status="400") == 1
    assert samples.get("compaction_proxy_requests_total", route="/v1/{path:path}", status="200") == 1
    assert samples.get("compaction_proxy_requests_total", route="unmatched", status="404") == 1
    assert samples.get("compaction_proxy_request_duration_seconds_count", route=CHAT) == 4
    assert samples.get("compaction_proxy_response_start_seconds_count", route=CHAT) == 4
    assert samples.get("compaction_proxy_request_duration_seconds_sum", route=CHAT) > 0

    headers = [heavy.headers, light.headers]
    before = sum(int(h["x-compaction-tokens-before"]) for h in headers)
    after = sum(int(h["x-compaction-tokens-after"]) for h in headers)
    # The stream's tokens count too; it is one short message either way (before == after).
    stream_tokens = (
        samples.get("compaction_proxy_prompt_tokens_total", wire="chat.completions", stage="before") - before
    )
    assert stream_tokens > 0
    assert (
        samples.get("compaction_proxy_prompt_tokens_total", wire="chat.completions", stage="after")
        == after + stream_tokens
    )
    assert after < before

    assert samples.get("compaction_proxy_strategy_seconds_count", strategy="shorten_tools") == 1
    assert samples.get("compaction_proxy_strategy_seconds_count", strategy="window") == 1  # the default chain
    assert samples.get("compaction_proxy_strategy_seconds_count", strategy="prune_tool_outputs") == 1
    assert samples.get("compaction_proxy_strategy_seconds_count", strategy="none") == 1
    assert samples.get("compaction_proxy_strategy_seconds_sum", strategy="shorten_tools") > 0


def test_unreachable_upstream_is_counted(start_proxy: ProxyFactory) -> None:
    with start_proxy(upstream_base_url=f"http://127.0.0.1:{closed_port()}/v1") as proxy:
        httpx.post(f"{proxy.url}{CHAT}", json={"messages": HI})
        httpx.get(f"{proxy.url}/v1/models")
        samples = scrape(proxy.url)
    assert samples.get("compaction_proxy_upstream_errors_total", kind="unreachable") == 2
    assert samples.get("compaction_proxy_requests_total", route=CHAT, status="502") == 1


def test_each_app_has_a_registry_of_its_own(start_proxy: ProxyFactory, upstream: StandInUpstream) -> None:
    with start_proxy() as busy, start_proxy() as quiet:
        httpx.post(f"{busy.url}{CHAT}", json={"model": "gpt-4o", "messages": HI})
        assert scrape(busy.url).get("compaction_proxy_requests_total", route=CHAT, status="200") == 1
        assert scrape(quiet.url).get("compaction_proxy_requests_total", route=CHAT, status="200") == 0
