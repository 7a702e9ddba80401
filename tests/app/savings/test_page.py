"""The savings page in a real browser: headless Chromium loads /dashboard from a proxy that has served a scripted
agent session (every wire format through the official SDKs, a context-length refusal learned, expand rounds and a
re-expansion on a second proxy sharing the store) and the figures it renders equal /metrics. Behind proxy keys the
page asks for one and shows nothing else.

SAVINGS_SCREENSHOT=docs/dashboard.png writes the page's screenshot there (the one in the docs is made so).
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai

from app import Settings, create_app
from tests.support.browser import chromium, dump_dom, screenshot
from tests.support.metrics import scrape
from tests.support.servers import LoopbackServer
from tests.support.upstream import Behaviour, StandInUpstream
from tests.support.waiting import wait_for

READ = "read_file"


def tool_output(i: int) -> str:
    return "\n".join(
        f"src/module_{i}.py:{line}: def handler_{i}_{line}(request): return route(request)" for line in range(60)
    )


def chat_history(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test."},
    ]
    for i in range(n):
        call = {"id": f"call_{i}", "type": "function", "function": {"name": READ, "arguments": f'{{"n": {i}}}'}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": tool_output(i)},
        ]
    return messages


def responses_history(n: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    for i in range(n):
        items += [
            {"type": "function_call", "call_id": f"call_{i}", "name": READ, "arguments": f'{{"n": {i}}}'},
            {"type": "function_call_output", "call_id": f"call_{i}", "output": tool_output(i)},
        ]
    return items


def messages_history(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    for i in range(n):
        use = {"type": "tool_use", "id": f"toolu_{i}", "name": READ, "input": {"n": i}}
        messages += [
            {"role": "assistant", "content": [use]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": tool_output(i)}],
            },
        ]
    return messages


def figures(dom: str) -> dict[str, str]:
    """The data-value of every data-figure element, by its figure's name."""
    found = {}
    for tag in re.findall(r"<[^>]*\bdata-figure=[^>]*>", dom):
        name = re.search(r'data-figure="([^"]*)"', tag)
        value = re.search(r'data-value="([^"]*)"', tag)
        assert name is not None and value is not None, tag
        found[name.group(1)] = html.unescape(value.group(1))
    return found


def table_rows(dom: str, table: str) -> list[list[str]]:
    body = re.search(rf'<table id="{table}"[^>]*>.*?<tbody>(.*?)</tbody>', dom, re.S)
    assert body is not None
    return [
        [html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S)
    ]


def session(proxy: LoopbackServer) -> None:
    """An agent at work in each API: the history grows request by request, some answers streamed."""
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-client", max_retries=0)
    claude = anthropic.Anthropic(base_url=proxy.url, api_key="sk-client", max_retries=0)
    for n in range(2, 26, 2):
        stream = n % 4 == 0
        if stream:
            chunks = client.chat.completions.create(
                model="gpt-4o",
                messages=chat_history(n),
                stream=True,
                stream_options={"include_usage": True},  # type: ignore[arg-type]
            )
            assert [chunk for chunk in chunks]
        else:
            client.chat.completions.create(model="gpt-4o", messages=chat_history(n))  # type: ignore[arg-type]
        if n % 6 == 0:
            client.responses.create(model="gpt-5", input=responses_history(n))  # type: ignore[arg-type]
        if n % 3 == 0:
            claude.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=messages_history(n))  # type: ignore[arg-type]


def test_the_page_shows_what_metrics_count_for_a_scripted_session(
    tmp_path: Path, upstream: StandInUpstream, expanding: str
) -> None:
    chromium()
    store = f"sqlite://{tmp_path}/cache.db"
    upstream.behaviour = Behaviour(context_window=16_000)  # the longest requests are refused: a window is learned
    agent = Settings(
        upstream_base_url=f"{upstream.url}/v1",  # type: ignore[attr-defined]
        anthropic_base_url=upstream.url,  # type: ignore[attr-defined]
        cache_url=store,
    )
    reader = Settings(upstream_base_url=expanding, cache_url=store)
    with LoopbackServer(create_app(agent), agent) as proxy, LoopbackServer(create_app(reader), reader) as other:
        session(proxy)
        client = openai.OpenAI(base_url=f"{other.url}/v1", api_key="sk-client", max_retries=0)
        headers = {"X-Compaction-Strategies": "mask(keep=1,epoch=0,min_gain=0)"}
        for n in (6, 8):
            client.chat.completions.create(model="gpt-4.1", messages=chat_history(n), extra_headers=headers)  # type: ignore[arg-type]
        metrics = [scrape(proxy.url), scrape(other.url)]
        requests = sum(
            samples.get("compaction_proxy_requests_total", route=route, status="200")
            for samples in metrics
            for route in ("/v1/chat/completions", "/v1/responses", "/v1/messages")
        )
        # Each proxy adds its counts to the store within a second; the page is then the sum of both.
        wait_for(lambda: requests_in_store(other) == requests, what="both proxies' counts in the store")
        dom = dump_dom(f"{proxy.url}/dashboard")
        shot = Path(os.environ.get("SAVINGS_SCREENSHOT") or tmp_path / "dashboard.png")
        screenshot(f"{proxy.url}/dashboard", shot)

    assert 'data-state="ready"' in dom
    shown = figures(dom)

    def total(name: str, **labels: str) -> int:
        return round(sum(samples.get(name, **labels) for samples in metrics))

    def over_wires(name: str, **labels: str) -> int:
        wires = ("chat.completions", "responses", "messages")
        return sum(round(sum(s.get(name, wire=w, **labels) for s in metrics)) for w in wires)

    assert int(shown["totals.requests"]) == requests
    assert int(shown["totals.tokens_before"]) == over_wires("compaction_proxy_prompt_tokens_total", stage="before")
    assert int(shown["totals.tokens_after"]) == over_wires("compaction_proxy_prompt_tokens_total", stage="after")
    for kind in ("uncached", "cache_read", "cache_write"):
        expected = over_wires("compaction_proxy_upstream_input_tokens_total", kind=kind)
        assert int(shown[f"totals.input.{kind}"]) == expected, kind
    assert int(shown["totals.input.cache_read"]) > 0
    assert int(shown["totals.expand.rounds.answered"]) == total(
        "compaction_proxy_expand_rounds_total", outcome="answered"
    )
    assert int(shown["totals.expand.calls.repeated"]) == total("compaction_proxy_expand_calls_total", result="repeated")
    assert int(shown["totals.expand.calls.repeated"]) == 2
    before, after = int(shown["totals.tokens_before"]), int(shown["totals.tokens_after"])
    assert after < before and float(shown["totals.saved_percent"]) == round(100 * (before - after) / before, 1)
    assert int(shown["totals.billed_input"]) < int(shown["totals.estimate_without_proxy"])
    assert shown["store"] == "sqlite"
    rows = {(row[0], row[1]) for row in table_rows(dom, "rows")}
    assert rows == {
        ("chat.completions", "gpt-4o"),
        ("chat.completions", "gpt-4.1"),
        ("responses", "gpt-5"),
        ("messages", "claude-sonnet-4-5"),
    }
    windows = table_rows(dom, "windows")
    assert ["chat.completions", "gpt-4o", "16,000"] in windows
    assert dom.count('data-series="') == 4  # the chart's four lines, drawn by the page itself


def requests_in_store(proxy: LoopbackServer) -> int:
    found: int = httpx.get(f"{proxy.url}/savings").json()["totals"]["requests"]
    return found


def test_behind_proxy_keys_the_page_asks_for_one_and_shows_no_figure(start_proxy: Any) -> None:
    chromium()
    with start_proxy(api_keys=["sk-proxy-key"]) as proxy:
        dom = dump_dom(f"{proxy.url}/dashboard")
    assert 'data-state="locked"' in dom
    assert re.search(r'<form id="unlock"(?![^>]*hidden)', dom) and re.search(r'<main id="figures"[^>]*hidden', dom)
    assert "data-value" not in dom
    assert "A proxy key is needed." in dom
