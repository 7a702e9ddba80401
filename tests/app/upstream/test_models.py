"""What the proxy learns of a model (app.upstream.models) under hostile input, each red-team finding's own shape
(issue 23, findings 3 to 5): one client cannot move the calibration another is budgeted with, fields the upstream
ignores teach nothing, images count, the 1M-context beta has its own window, and a full learned-models table still
retries.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.app.conftest import ProxyFactory
from tests.factories import qa_chat, user
from tests.support.upstream import Behaviour, Canned, StandInUpstream

SMALL = {"small-model": {"context_window": 4000, "max_output": 256}}


def chat(proxy: str, key: str, messages: list[Any], model: str = "small-model", **extra: Any) -> httpx.Response:
    body = {"model": model, "messages": messages, "max_tokens": 256, **extra}
    return httpx.post(f"{proxy}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def answered_with(prompt_tokens: int) -> Canned:
    """An answer whose usage says the upstream counted prompt_tokens."""
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 1, "total_tokens": prompt_tokens + 1}
    message = {"role": "assistant", "content": "ok"}
    body = {"id": "c", "object": "chat.completion", "choices": [{"index": 0, "message": message}], "usage": usage}
    return Canned(200, json.dumps(body).encode(), {"content-type": "application/json"})


def forwarded(upstream: StandInUpstream) -> list[Any]:
    return [r.json() for r in upstream.received if r.path.endswith("/chat/completions")]


def test_a_claim_of_a_million_unseen_tokens_is_not_counted_and_moves_no_one_else(
    upstream: StandInUpstream, start_proxy: ProxyFactory
) -> None:
    claim = {"role": "user", "content": "and this", "_wire": {"tokens": 1_000_000}}
    text = [user("Tell me about the weather in a few long sentences, please. " * 12), claim]
    with start_proxy(models=SMALL) as proxy:
        upstream.canned = answered_with(180)  # the upstream ignores the field
        for _ in range(3):
            hostile = chat(proxy.url, "sk-hostile", text)
            assert hostile.status_code == 200
            assert int(hostile.headers["x-compaction-tokens-before"]) < 1000
        upstream.canned = None
        upstream.behaviour = Behaviour(context_window=4000)
        upstream.received.clear()
        honest = chat(proxy.url, "sk-honest", qa_chat(300))  # about 8,500 tokens: past the window
    assert honest.status_code == 200 and "x-compaction-retried" not in honest.headers
    [sent] = forwarded(upstream)  # fitted the first time: compacted to the window by the right counts
    assert int(honest.headers["x-compaction-tokens-after"]) <= 4000 - 256
    assert len(sent["messages"]) < len(qa_chat(300))


def test_images_count_and_one_clients_images_do_not_cut_another_clients_conversation(
    upstream: StandInUpstream, start_proxy: ProxyFactory
) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    text = {"type": "text", "text": "Describe the layout of these screenshots, one by one, in detail. " * 4}
    shots = [{"role": "user", "content": [text, *[image] * 10]}]
    models = {"small-model": {"context_window": 8000, "max_output": 256}}
    with start_proxy(models=models) as proxy:
        dry_run = {"model": "small-model", "messages": shots, "max_tokens": 256}
        counted = httpx.post(f"{proxy.url}/compact", json=dry_run, timeout=60).json()["tokens_before"]
        # Ten images at 765 tokens each, as the upstream counts them: the proxy's count holds them.
        assert counted >= 10 * 765
        upstream.canned = answered_with(counted + 10)
        for _ in range(6):
            assert chat(proxy.url, "sk-images", shots).status_code == 200
        upstream.canned = None
        upstream.received.clear()
        conversation = qa_chat(25)  # 52 messages that fit the window whole
        other = chat(proxy.url, "sk-other", conversation)
        again = chat(proxy.url, "sk-images", shots)
    assert other.status_code == 200
    assert len(forwarded(upstream)[0]["messages"]) == len(conversation)
    # The images' client stays calibrated near 1: its count is the upstream's.
    assert abs(int(again.headers["x-compaction-tokens-before"]) - counted) <= counted * 0.05


def test_a_refusal_without_the_1m_beta_does_not_cut_a_request_with_it(
    upstream: StandInUpstream, start_proxy: ProxyFactory
) -> None:
    long_answer = "The fix touches the parser, the cache and the relay; each step is checked. " * 40
    conversation = [m for i in range(400) for m in (user(f"Step {i}?"), {"role": "assistant", "content": long_answer})]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": [*conversation, user("Go on.")]}
    headers = {"x-api-key": "sk-ant", "anthropic-version": "2023-06-01"}
    refusal = {"type": "error", "error": {"type": "invalid_request_error", "message": ""}}
    refusal["error"]["message"] = "prompt is too long: 301000 tokens > 200000 maximum"
    with start_proxy() as proxy:
        upstream.canned = Canned(400, json.dumps(refusal).encode(), {"content-type": "application/json"})
        refused = httpx.post(f"{proxy.url}/v1/messages", json=body, headers=headers, timeout=120)
        assert refused.status_code == 400
        upstream.canned = None
        upstream.received.clear()
        beta = {**headers, "anthropic-beta": "context-1m-2025-08-07"}
        wide = httpx.post(f"{proxy.url}/v1/messages", json=body, headers=beta, timeout=120)
    assert wide.status_code == 200
    assert int(wide.headers["x-compaction-tokens-before"]) > 250_000
    [sent] = [r.json() for r in upstream.received if r.path == "/v1/messages"]
    assert len(sent["messages"]) == len(body["messages"])  # the 1M window holds it whole


def test_a_learned_models_table_filled_with_junk_names_still_retries_a_new_model(
    upstream: StandInUpstream, start_proxy: ProxyFactory
) -> None:
    # llama.cpp's server answers under any model name, so junk names are refused and learned like real ones.
    upstream.behaviour = Behaviour(context_window=2048, overflow="llama.cpp")
    history = qa_chat(200)
    with start_proxy(learned_models_max=4) as proxy:
        for n in range(6):
            assert chat(proxy.url, "sk-junk", history, model=f"junk-{n}").status_code == 200
        real = chat(proxy.url, "sk-real", history, model="real-model")
    assert real.status_code == 200
    assert real.headers["x-compaction-retried"] == "context_length_exceeded"
