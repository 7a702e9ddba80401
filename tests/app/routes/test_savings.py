"""GET /savings and GET /dashboard on a real proxy: the figures behind the keys and the page open to all; totals that
equal /metrics, for every wire format, streamed or not, expand rounds included; proxies on one store (a real SQLite
file, a real Redis) adding up and surviving a restart; a store that fails costing no request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from starlette.middleware.gzip import GZipMiddleware

from app import Settings, create_app
from tests.app.conftest import ProxyFactory
from tests.factories import agent_loop
from tests.support.metrics import Samples, scrape
from tests.support.scripted_messages import USAGE as MESSAGES_USAGE
from tests.support.scripted_messages import Reply, ScriptedMessages, text
from tests.support.scripted_model import USAGE, ScriptedModel, Turn
from tests.support.servers import LoopbackServer, closed_port
from tests.support.upstream import StandInUpstream
from tests.support.waiting import wait_for

WIRES = ("chat.completions", "responses", "messages")
KINDS = ("uncached", "cache_read", "cache_write")


def savings(proxy: LoopbackServer, **headers: str) -> dict[str, Any]:
    response = httpx.get(f"{proxy.url}/savings", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    found: dict[str, Any] = response.json()
    return found


def assert_totals_equal_metrics(report: dict[str, Any], metrics: list[Samples]) -> None:
    """What the page shows as totals is what Prometheus scrapes, summed over the proxies that share the store."""

    def metric(name: str, **labels: str) -> int:
        return round(sum(samples.get(name, **labels) for samples in metrics))

    per_wire: dict[str, dict[str, int]] = {wire: {} for wire in WIRES}
    for row in report["rows"]:
        counts = per_wire[row["wire"]]
        for name in ("tokens_before", "tokens_after"):
            counts[name] = counts.get(name, 0) + row[name]
        for kind in KINDS:
            counts[kind] = counts.get(kind, 0) + row["input"][kind]
    for wire in WIRES:
        for stage in ("before", "after"):
            expected = metric("compaction_proxy_prompt_tokens_total", wire=wire, stage=stage)
            assert per_wire[wire].get(f"tokens_{stage}", 0) == expected
        for kind in KINDS:
            expected = metric("compaction_proxy_upstream_input_tokens_total", wire=wire, kind=kind)
            assert per_wire[wire].get(kind, 0) == expected
    totals = report["totals"]
    for outcome, count in totals["expand"]["rounds"].items():
        assert count == metric("compaction_proxy_expand_rounds_total", outcome=outcome)
    for outcome, count in totals["expand"]["calls"].items():
        assert count == metric("compaction_proxy_expand_calls_total", result=outcome)
    for reason, count in totals["fallbacks"].items():
        assert count == metric("compaction_proxy_fallbacks_total", reason=reason)


def test_every_wire_format_streamed_or_not_adds_up_to_what_metrics_say(
    start_proxy: ProxyFactory, upstream: StandInUpstream
) -> None:
    with start_proxy() as proxy:
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-client", max_retries=0)
        history: Any = agent_loop(4, 3000)
        client.chat.completions.create(model="gpt-4o", messages=history)
        stream = client.chat.completions.create(
            model="gpt-4o", messages=history, stream=True, stream_options={"include_usage": True}
        )
        assert [chunk for chunk in stream]
        client.responses.create(model="gpt-4.1", input="hello")
        claude = anthropic.Anthropic(base_url=proxy.url, api_key="sk-client", max_retries=0)
        claude.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
        with claude.messages.stream(
            model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        ) as events:
            assert events.get_final_message().content
        report = savings(proxy)
        assert_totals_equal_metrics(report, [scrape(proxy.url)])
    totals = report["totals"]
    assert totals["requests"] == 5 and totals["usage_reported"] == 5
    assert totals["input"]["uncached"] == sum(r.prompt_tokens or 0 for r in upstream.received)  # as it reported
    models = {(row["wire"], row["model"]): row["requests"] for row in report["rows"]}
    assert models == {
        ("chat.completions", "gpt-4o"): 2,
        ("responses", "gpt-4.1"): 1,
        ("messages", "claude-sonnet-4-5"): 2,
    }
    assert report["store"] == "memory" and report["series"][-1]["requests"] == 5


def test_the_figures_are_behind_the_keys_and_the_page_that_shows_them_is_not(start_proxy: ProxyFactory) -> None:
    with start_proxy(api_keys=["sk-proxy-key"]) as proxy:
        refused = httpx.get(f"{proxy.url}/savings")
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "missing_api_key"
        assert httpx.get(f"{proxy.url}/savings", headers={"authorization": "Bearer sk-wrong"}).status_code == 401
        assert savings(proxy, authorization="Bearer sk-proxy-key")["totals"]["requests"] == 0
        assert savings(proxy, **{"x-api-key": "sk-proxy-key"})["totals"]["requests"] == 0
        page = httpx.get(f"{proxy.url}/dashboard")
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    assert "data-value" not in page.text and "sk-proxy-key" not in page.text  # no figure, no key: only the shell
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy and "unsafe" not in policy
    assert "frame-ancestors 'none'" in policy and page.headers["x-content-type-options"] == "nosniff"


def test_expand_rounds_re_expansions_and_every_rounds_usage_are_counted(expanding: str) -> None:
    settings = Settings(upstream_base_url=expanding)
    with LoopbackServer(create_app(settings), settings) as proxy:
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-client", max_retries=0)
        headers = {"X-Compaction-Strategies": "mask(keep=1,epoch=0,min_gain=0)"}
        client.chat.completions.create(model="gpt-4o", messages=agent_loop(6, 2000), extra_headers=headers)  # type: ignore[arg-type]
        report = savings(proxy)
        assert_totals_equal_metrics(report, [scrape(proxy.url)])
    totals = report["totals"]
    assert totals["expand"]["rounds"]["answered"] == 2 and totals["expand"]["calls"]["repeated"] == 1
    assert totals["usage_reported"] == 3  # every round billed, the internal ones too
    cached = USAGE["prompt_tokens_details"]["cached_tokens"]  # type: ignore[index]
    assert totals["input"] == {"uncached": 3 * (100 - cached), "cache_read": 3 * cached, "cache_write": 0}


def test_a_long_messages_stream_is_counted_with_the_input_its_first_event_reported() -> None:
    long = "word " * 8000  # 40 KB: message_start is far before the last 16 KB
    model = ScriptedMessages(lambda payload: Reply([text(long)]))
    with LoopbackServer(model.app) as upstream:
        settings = Settings(anthropic_base_url=upstream.url)
        with LoopbackServer(create_app(settings), settings) as proxy:
            claude = anthropic.Anthropic(base_url=proxy.url, api_key="sk-client", max_retries=0)
            with claude.messages.stream(
                model="claude-opus-4-1", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
            ) as events:
                assert events.get_final_text() == long
            report = savings(proxy)
    assert report["totals"]["input"] == {
        "uncached": MESSAGES_USAGE["input_tokens"],
        "cache_read": MESSAGES_USAGE["cache_read_input_tokens"],
        "cache_write": MESSAGES_USAGE["cache_creation_input_tokens"],
    }


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_proxies_on_one_store_add_up_and_their_figures_survive_a_restart(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, expanding: str
) -> None:
    url = f"sqlite://{tmp_path}/cache.db" if kind == "sqlite" else request.getfixturevalue("redis_url")
    settings = Settings(upstream_base_url=expanding, cache_url=url)

    def ask(proxy: LoopbackServer, model: str) -> None:
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-client", max_retries=0)
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])

    with (
        LoopbackServer(create_app(settings), settings) as first,
        LoopbackServer(create_app(settings), settings) as second,
    ):
        ask(first, "gpt-4o")
        ask(first, "gpt-4o")
        ask(second, "gpt-4.1")
        # The first proxy adds its counts to the store within a second (FLUSH_SECONDS); the second's read adds its own.
        wait_for(lambda: savings(second)["totals"]["requests"] == 3, what="the first proxy's counts in the store")
        both = savings(second)
        assert_totals_equal_metrics(both, [scrape(first.url), scrape(second.url)])
    assert {row["model"]: row["requests"] for row in both["rows"]} == {"gpt-4o": 2, "gpt-4.1": 1}
    assert both["store"] == kind and both["totals"]["input"]["cache_read"] == 3 * 40
    with LoopbackServer(create_app(settings), settings) as restarted:
        again = savings(restarted)
    assert again["totals"] == both["totals"] and again["series"] == both["series"]


def test_a_store_that_fails_costs_no_request_and_is_counted(expanding: str) -> None:
    settings = Settings(upstream_base_url=expanding, cache_url=f"redis://127.0.0.1:{closed_port()}/0")
    with LoopbackServer(create_app(settings), settings) as proxy:
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-client", max_retries=0)
        answer = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content == "Done."
        unreadable = httpx.get(f"{proxy.url}/savings")
        assert unreadable.status_code == 503 and unreadable.json()["error"]["code"] == "savings_unavailable"
        assert scrape(proxy.url).get("compaction_proxy_savings_store_errors_total") >= 1


def test_a_compressed_answer_is_counted_and_relayed_as_it_came() -> None:
    # The SDKs ask for gzip, and hosted APIs compress whole answers: the client gets the bytes as they came, and the
    # ledger reads the usage from a decoded copy.
    model = ScriptedModel(lambda payload: Turn(text="Done."))
    with LoopbackServer(GZipMiddleware(model.app, minimum_size=0)) as upstream:
        settings = Settings(upstream_base_url=f"{upstream.url}/v1")
        with LoopbackServer(create_app(settings), settings) as proxy:
            client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-client", max_retries=0)
            raw = client.chat.completions.with_raw_response.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
            assert raw.headers["content-encoding"] == "gzip"
            assert raw.parse().choices[0].message.content == "Done."
            report = savings(proxy)
            assert_totals_equal_metrics(report, [scrape(proxy.url)])
    cached = USAGE["prompt_tokens_details"]["cached_tokens"]  # type: ignore[index]
    assert report["totals"]["input"] == {"uncached": 100 - cached, "cache_read": cached, "cache_write": 0}
