"""X-Compaction-Prefix end to end: what the proxy's forwarding did to the provider's prompt cache, per request,
with its state in the notes cache (memory, a real Redis shared by two processes, an unreachable one); and the
request fields providers key their caches on reach the upstream untouched.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import openai
import pytest
import redis

from app.edge.headers import INTERNAL
from tests.app.conftest import ProxyFactory
from tests.factories import Message, agent_loop, assistant, qa_chat, system
from tests.support.logs import captured_logs, parsed
from tests.support.metrics import scrape
from tests.support.process import ProxyProcess
from tests.support.servers import closed_port
from tests.support.upstream import StandInUpstream

NONE = {"X-Compaction-Strategies": "none"}
OUTCOMES = ("new", "extends", "breaks", "unknown")


def conversation(pairs: int, opening: str) -> list[Message]:
    """qa_chat with a system prompt of its own: the session's proxy keeps state across tests."""
    return [system(opening), *qa_chat(pairs)[1:]]


def send(client: openai.OpenAI, messages: list[Message], headers: dict[str, str], model: str = "gpt-4o") -> Any:
    raw = client.chat.completions.with_raw_response.create(model=model, messages=messages, extra_headers=headers)  # type: ignore[arg-type]
    raw.parse()
    return raw.headers


def sdk(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test-key", max_retries=0)


def test_a_growing_conversation_extends_an_edited_one_breaks_another_is_new(client: openai.OpenAI) -> None:
    opening = f"Be brief. {uuid.uuid4().hex}"
    seen = [send(client, conversation(pairs, opening), NONE)["x-compaction-prefix"] for pairs in (2, 3, 4)]
    assert seen == ["new", "extends", "extends"]

    edited = conversation(5, opening)
    edited[4] = assistant("Answer 001: on second thoughts, no.")  # a change in the middle of the history
    assert send(client, edited, NONE)["x-compaction-prefix"] == "breaks"
    assert send(client, conversation(6, opening), NONE)["x-compaction-prefix"] == "breaks"  # back to the unedited
    assert send(client, conversation(7, opening), NONE)["x-compaction-prefix"] == "extends"
    streamed: Any = conversation(8, opening)
    with client.chat.completions.with_streaming_response.create(
        model="gpt-4o", messages=streamed, extra_headers=NONE, stream=True
    ) as stream:
        assert stream.headers["x-compaction-prefix"] == "extends"  # streams carry it too
        list(stream.iter_lines())

    other = conversation(2, f"Be brief. {uuid.uuid4().hex}")
    assert send(client, other, NONE)["x-compaction-prefix"] == "new"
    # Another model is another cache at the provider: a conversation of its own.
    assert send(client, conversation(9, opening), NONE, model="gpt-4.1")["x-compaction-prefix"] == "new"


def test_a_sliding_window_breaks_the_prefix_and_metrics_count_it(
    start_proxy: ProxyFactory, upstream: StandInUpstream
) -> None:
    # low_water=1: the window moves with every request, so the oldest kept unit changes each time.
    chain = {"X-Compaction-Strategies": "window(budget=100,low_water=1)"}
    answer = "{i} " + "blah " * 40
    with start_proxy() as proxy:
        client = sdk(proxy.url)
        headers = [send(client, qa_chat(pairs, answer=answer), chain) for pairs in range(3, 7)]
        samples = scrape(proxy.url)

    # The oracle: what the upstream received, each body judged against the one before it.
    forwarded = [r.json()["messages"] for r in upstream.received]
    expected = ["new"] + [
        "extends" if now[: len(before)] == before else "breaks"
        for before, now in zip(forwarded, forwarded[1:], strict=False)
    ]
    seen = [h["x-compaction-prefix"] for h in headers]
    assert seen == expected
    assert seen.count("breaks") >= 2
    for outcome in OUTCOMES:
        assert samples.get("compaction_proxy_prefix_total", outcome=outcome) == seen.count(outcome)

    removed = sum(int(h["x-compaction-tokens-before"]) - int(h["x-compaction-tokens-after"]) for h in headers)
    assert removed > 0
    assert samples.get("compaction_proxy_tokens_removed_total", wire="chat.completions") == removed


@pytest.mark.parametrize("proxy_keys", [True, False], ids=["proxy keys", "clients' own keys"])
def test_no_key_learns_what_another_sent_nor_overwrites_it(start_proxy: ProxyFactory, proxy_keys: bool) -> None:
    keys = ["sk-proxy-k1", "sk-proxy-k2"]
    opening = f"Be brief. {uuid.uuid4().hex}"
    edited = conversation(2, opening)
    edited[2] = assistant("Answer 000: something else.")  # the same opening, then other messages
    with start_proxy(**({"api_keys": keys} if proxy_keys else {})) as proxy:
        k1, k2 = (openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=key, max_retries=0) for key in keys)
        assert send(k1, conversation(2, opening), NONE)["x-compaction-prefix"] == "new"
        # Were the state shared, "breaks" (or "extends") would tell k2 that someone sent this opening.
        assert send(k2, edited, NONE)["x-compaction-prefix"] == "new"
        assert send(k1, conversation(3, opening), NONE)["x-compaction-prefix"] == "extends"  # k2 left it alone
        assert send(k2, [*edited, *conversation(3, opening)[-2:]], NONE)["x-compaction-prefix"] == "extends"


def test_two_proxy_processes_share_the_state_through_redis(upstream: StandInUpstream, redis_url: str) -> None:
    env = {"COMPACTION_UPSTREAM_BASE_URL": f"{upstream.url}/v1", "COMPACTION_CACHE_URL": redis_url}  # type: ignore[attr-defined]
    with (
        ProxyProcess(env=env) as first,
        ProxyProcess(env={**env, "COMPACTION_PREFIX_TRACKING_TTL_SECONDS": "120"}) as second,
    ):
        assert send(sdk(first.url), qa_chat(3), NONE)["x-compaction-prefix"] == "new"
        assert send(sdk(second.url), qa_chat(4), NONE)["x-compaction-prefix"] == "extends"
        assert send(sdk(first.url), qa_chat(5), NONE)["x-compaction-prefix"] == "extends"

    store = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        # Besides what the upstream's usage taught and the savings ledger's figures:
        keys = [key for key in store.keys("*") if ":limits:" not in key and ":savings:" not in key]
        assert len(keys) == 1 and ":prefix:" in keys[0]  # one conversation, in a namespace of its own
        value = store.get(keys[0])
        assert value is not None and value.startswith(f"{len(qa_chat(5))}:")
        assert 0 < store.ttl(keys[0]) <= 3600  # the tracker's TTL, not the notes' week
    finally:
        store.close()


def test_an_unreachable_cache_reports_unknown_and_the_request_goes_on(
    start_proxy: ProxyFactory, upstream: StandInUpstream
) -> None:
    secret = "hunter2-cache-password"
    with captured_logs() as lines, start_proxy(cache_url=f"redis://:{secret}@127.0.0.1:{closed_port()}/0") as proxy:
        client = sdk(proxy.url)
        messages: Any = qa_chat(2)
        raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages, extra_headers=NONE)
        assert raw.parse().choices[0].message.content == f"seen {len(qa_chat(2))} messages"
        assert raw.headers["x-compaction-prefix"] == "unknown"
        assert send(client, qa_chat(3), NONE)["x-compaction-prefix"] == "unknown"
        samples = scrape(proxy.url)
    assert samples.get("compaction_proxy_prefix_total", outcome="unknown") == 2
    warnings = [e for e in parsed(lines) if e["logger"] == "compaction_proxy.prefix"]
    assert len(warnings) == 2 and all(e["level"] == "warning" for e in warnings)  # one per failed request
    assert not any(secret in line for line in lines)


def test_tracking_off_no_header_and_no_cache_access(start_proxy: ProxyFactory, redis_url: str) -> None:
    store = redis.Redis.from_url(redis_url, decode_responses=True)
    store.config_resetstat()
    # learn_limits off too: the upstream's usage would otherwise be learned from in the same cache.
    with start_proxy(prefix_tracking=False, learn_limits=False, cache_url=redis_url) as proxy:
        client = sdk(proxy.url)
        for pairs in (2, 3):
            assert "x-compaction-prefix" not in send(client, qa_chat(pairs), NONE)
        samples = scrape(proxy.url)
    commands = set(store.info("commandstats"))
    store.close()
    assert not commands & {"cmdstat_get", "cmdstat_getex", "cmdstat_set"}, commands
    assert all(samples.get("compaction_proxy_prefix_total", outcome=o) == 0 for o in OUTCOMES)


def test_dry_runs_and_summariser_calls_are_not_tracked(start_proxy: ProxyFactory, upstream: StandInUpstream) -> None:
    messages = qa_chat(2)
    with start_proxy() as proxy:
        dry = httpx.post(f"{proxy.url}/compact", json={"model": "gpt-4o", "messages": messages}, headers=NONE)
        assert dry.status_code == 200 and "x-compaction-prefix" not in dry.headers
        internal = send(sdk(proxy.url), messages, {INTERNAL.decode(): "summariser"})
        assert "x-compaction-prefix" not in internal
        assert len(upstream.received) == 1  # it was forwarded, untracked
        # Neither wrote anything: the conversation's first tracked request is new.
        assert send(sdk(proxy.url), messages, NONE)["x-compaction-prefix"] == "new"
        samples = scrape(proxy.url)
    assert samples.get("compaction_proxy_prefix_total", outcome="new") == 1
    assert sum(samples.get("compaction_proxy_prefix_total", outcome=o) for o in OUTCOMES) == 1


# Fields providers key their prompt caches (and their abuse checks) on, and fields the proxy has never heard of.
CACHE_FIELDS: dict[str, Any] = {
    "prompt_cache_key": "conversation-42",
    "user": "user-7",
    "safety_identifier": "sha256:ab12",
    "prompt_cache_retention": "24h",
    "metadata": {"team": "search", "ticket": "T-1"},
    "store": True,
}
UNKNOWN_FIELDS: dict[str, Any] = {
    "vendor_flag": {"nested": [1, 2.5, None, "é"]},
    "top_k": 3,
    "big": 12345678901234567890,
}


def test_cache_fields_reach_upstream_untouched_compacted_or_not(
    client: openai.OpenAI, upstream: StandInUpstream
) -> None:
    messages = agent_loop(40, output_chars=2000)  # long tool results: prune_tool_outputs cuts them
    for strategies in ("none", "prune_tool_outputs(max_chars=10)"):
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o",
            messages=messages,  # type: ignore[arg-type]
            extra_headers={"X-Compaction-Strategies": strategies},
            extra_body=UNKNOWN_FIELDS,
            **CACHE_FIELDS,
        )
        raw.parse()
    untouched, compacted = (r.json() for r in upstream.received)
    assert json.loads(upstream.received[0].body) == {
        "model": "gpt-4o",
        "messages": messages,
        **CACHE_FIELDS,
        **UNKNOWN_FIELDS,
    }
    # Compacted: only the messages differ (and the expand tool the stubs call for is added after them), and the
    # other fields keep their order and values.
    assert compacted["messages"] != messages and "[... output truncated: " in json.dumps(compacted["messages"])
    assert list(compacted) == [*untouched, "tools"]
    assert [t["function"]["name"] for t in compacted["tools"]] == ["compaction_expand"]
    assert {k: v for k, v in compacted.items() if k not in ("messages", "tools")} == {
        k: v for k, v in untouched.items() if k != "messages"
    }
    assert compacted["big"] == 12345678901234567890 and isinstance(compacted["big"], int)
