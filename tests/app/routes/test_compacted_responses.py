"""POST /v1/responses through the proxy on loopback, driven by the official openai SDK (which sends through its own
HTTP stack, so only a real server sees it), against the stand-in upstream.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.app.conftest import ProxyFactory
from tests.factories import item_message, responses_agent_loop
from tests.support.metrics import scrape
from tests.support.responses import pairing_problems
from tests.support.servers import LoopbackServer
from tests.support.upstream import Canned, StandInUpstream

WINDOW = {"X-Compaction-Strategies": "window(budget=20000)"}
OPAQUE = ("reasoning", "compaction")


def assert_compacted_validly(history: list[dict[str, Any]], sent: list[dict[str, Any]]) -> None:
    assert len(sent) < len(history)
    assert pairing_problems(sent) == []
    originals = [json.dumps(item, sort_keys=True) for item in history]
    following = {originals[i]: originals[i + 1] for i in range(len(history) - 1)}
    for index, item in enumerate(sent):
        # window drops whole turns and changes none: every item is one of the originals, in order.
        assert json.dumps(item, sort_keys=True) in originals
        if item["type"] == "reasoning":  # still right before the call it came with
            assert following[json.dumps(item, sort_keys=True)] == json.dumps(sent[index + 1], sort_keys=True)
    assert history[:3] == sent[:3]  # the instructions, the task and the compaction item carrying what came before
    assert history[-3:] == sent[-3:]  # the newest round whole: its reasoning, call and output
    assert [item for item in sent if item["type"] in OPAQUE] == [
        item for item in history if item["type"] in OPAQUE and item in sent
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_long_agent_history_is_forwarded_compacted_and_valid(
    client: openai.OpenAI, upstream: StandInUpstream, stream: bool
) -> None:
    history = responses_agent_loop(120, output_chars=2000)

    raw = client.responses.with_raw_response.create(model="gpt-5", input=history, stream=stream, extra_headers=WINDOW)

    sent = upstream.last().json()["input"]
    assert_compacted_validly(history, sent)
    assert (
        int(raw.headers["x-compaction-tokens-before"]) > 60_000 > 20_000 > int(raw.headers["x-compaction-tokens-after"])
    )
    if stream:
        events = list(raw.parse())
        assert events[-1].type == "response.completed"
        assert events[-1].response.output_text == f"seen {len(sent)} items"
    else:
        assert raw.parse().output_text == f"seen {len(sent)} items"


def test_the_default_chain_leaves_a_short_request_as_it_came(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    body = b'{"model":  "gpt-5", "input": [ {"role": "user", "content": "hi \\u00e9"} ], "store": false}'
    response = httpx.post(f"{proxy.url}/v1/responses", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert response.headers["x-compaction-strategies"] == "minify,mask,window"
    assert upstream.last().body == body
    assert upstream.last().path == "/v1/responses"


def test_fields_the_proxy_does_not_act_on_pass_untouched(client: openai.OpenAI, upstream: StandInUpstream) -> None:
    client.responses.create(
        model="gpt-5",
        input=responses_agent_loop(60, output_chars=2000),
        instructions="Be terse.",
        previous_response_id="resp_earlier",
        store=False,
        include=["reasoning.encrypted_content"],
        prompt_cache_key="thread-1",
        reasoning={"effort": "low"},
        tools=[{"type": "function", "name": "read_file", "parameters": {"type": "object", "properties": {}}}],
        truncation="auto",
        extra_headers={"X-Compaction-Strategies": "window(budget=5000)"},
    )
    body = upstream.last().json()
    assert body["instructions"] == "Be terse."
    assert body["previous_response_id"] == "resp_earlier"
    assert body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["prompt_cache_key"] == "thread-1"
    assert body["reasoning"] == {"effort": "low"}
    assert body["tools"][0]["name"] == "read_file"
    assert body["truncation"] == "auto"
    assert len(body["input"]) < 60 * 3


def test_a_broken_upstream_stream_makes_the_sdk_raise(client: openai.OpenAI, upstream: StandInUpstream) -> None:
    upstream.break_stream_after = 3
    stream = client.responses.create(model="gpt-5", input="hi", stream=True)
    with pytest.raises(openai.APIError) as raised:
        for _ in stream:
            pass
    assert "broke off" in raised.value.message


def test_a_broken_stream_ends_in_an_error_event(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    upstream.break_stream_after = 3
    response = httpx.post(f"{proxy.url}/v1/responses", json={"model": "gpt-5", "input": "hi", "stream": True})
    last = response.text.rstrip("\n").split("\n\n")[-1]
    assert last.startswith("event: error\ndata: ")
    event = json.loads(last.split("data: ", 1)[1])
    assert event["type"] == "error"
    assert event["code"] == event["error"]["code"] == "upstream_broken_stream"
    assert "response.completed" not in response.text


def test_an_upstream_error_reaches_the_client_unchanged(client: openai.OpenAI, upstream: StandInUpstream) -> None:
    error = {"error": {"message": "Slow down.", "type": "rate_limit_error", "param": None, "code": "rate_limited"}}
    headers = {"content-type": "application/json", "retry-after": "7", "x-request-id": "req_upstream_1"}
    upstream.canned = Canned(429, json.dumps(error).encode(), headers)
    with pytest.raises(openai.RateLimitError) as raised:
        client.responses.create(model="gpt-5", input="hi")
    assert raised.value.body == error["error"]
    assert raised.value.response.headers["retry-after"] == "7"
    assert raised.value.response.headers["x-request-id"] == "req_upstream_1"


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        (b'{"input": ', None, "invalid_json"),
        (b"[]", None, "invalid_json"),
        (b'{"input": 5}', "input", "invalid_type"),
        (b'{"input": ["hi"]}', "input[0]", "invalid_type"),
        (b'{"input": "hi", "stream": "yes"}', "stream", "invalid_type"),
        (b'{"input": ' + b"[" * 100 + b"]" * 100 + b"}", None, "too_deep"),
    ],
    ids=["malformed", "not-an-object", "input-a-number", "item-a-string", "stream-a-string", "too-deep"],
)
def test_a_bad_body_is_a_400_in_openai_shape(
    proxy: LoopbackServer, upstream: StandInUpstream, body: bytes, param: str | None, code: str
) -> None:
    response = httpx.post(f"{proxy.url}/v1/responses", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param, code)
    assert upstream.received == []


# Found by the schema fuzz (tests/app/test_openapi.py): `part.get("type") in TEXT_PARTS` raised TypeError
# (unhashable) for a part whose type is a list or an object, a 500. Such a part is one the proxy does not know, so it
# goes as it came, as every field the proxy does not act on; the API judges it.
@pytest.mark.parametrize("path", ["/v1/responses", "/compact/responses"])
@pytest.mark.parametrize("kind", [[], {}, ["input_text"]], ids=["empty-list", "an-object", "a-list"])
def test_a_content_part_whose_type_is_no_string_goes_as_it_came(
    proxy: LoopbackServer, upstream: StandInUpstream, path: str, kind: Any
) -> None:
    body = {"model": "gpt-5", "input": [{"role": "user", "content": [{"type": kind, "text": "hi"}]}]}
    response = httpx.post(f"{proxy.url}{path}", json=body)
    assert response.status_code == 200
    sent = upstream.last().json()["input"] if path == "/v1/responses" else response.json()["input"]
    assert sent == body["input"]


def test_an_output_whose_parts_include_one_of_no_string_type_is_compacted(
    proxy: LoopbackServer, upstream: StandInUpstream
) -> None:
    # Rebuilding a rewritten output looked up every part's type in TEXT_PARTS too.
    history = responses_agent_loop(30, output_chars=2000)
    odd = next(i for i, item in enumerate(history) if item.get("type") == "function_call_output")
    history[odd] = {**history[odd], "output": [{"type": {}}, {"type": "input_text", "text": "x" * 4000}]}
    shorten = {"X-Compaction-Strategies": "shorten_tools(max_tool_chars=0,full_tool_outputs=0)"}
    response = httpx.post(f"{proxy.url}/compact/responses", json={"model": "gpt-5", "input": history}, headers=shorten)
    assert response.status_code == 200
    output = response.json()["input"][odd]["output"]
    assert output[0] == {"type": {}} and output[1]["type"] == "input_text" and len(output[1]["text"]) < 4000


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/responses/compact", {"model": "gpt-5", "input": "long story"}),
        ("GET", "/v1/responses/resp_1?include[]=reasoning.encrypted_content", None),
        ("GET", "/v1/responses/resp_1/input_items?limit=2&order=asc", None),
        ("POST", "/v1/responses/input_tokens", {"model": "gpt-5", "input": "count me"}),
        ("POST", "/v1/responses/resp_1/cancel", None),
        ("DELETE", "/v1/responses/resp_1", None),
    ],
    ids=["compact", "retrieve", "input-items", "input-tokens", "cancel", "delete"],
)
def test_the_other_responses_paths_pass_through(
    proxy: LoopbackServer, upstream: StandInUpstream, method: str, path: str, body: dict[str, Any] | None
) -> None:
    content = json.dumps(body).encode() if body is not None else None
    response = httpx.request(method, f"{proxy.url}{path}", content=content, headers={"authorization": "Bearer sk-1"})
    assert response.status_code == 200
    received = upstream.last()
    assert (received.method, received.path) == (method, path.split("?")[0])
    assert received.query == (path.split("?", 1)[1] if "?" in path else "")
    assert received.body == (content or b"")
    assert received.headers["authorization"] == "Bearer sk-1"
    assert "x-compaction-tokens-before" not in response.headers  # passed through, not compacted


def test_the_dry_run_answers_what_would_be_sent(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    history = responses_agent_loop(60, output_chars=2000)
    body = {"model": "gpt-5", "instructions": "Be terse.", "input": history}
    response = httpx.post(f"{proxy.url}/compact/responses", json=body, headers=WINDOW)
    assert response.status_code == 200
    answer = response.json()
    assert answer["instructions"] == "Be terse."
    assert_compacted_validly(history, answer["input"])
    assert answer["tokens_before"] > answer["tokens_after"]
    assert [step["strategy"] for step in answer["steps"]] == ["window"]
    assert upstream.received == []


def test_a_user_message_in_string_form_is_compacted_as_one(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    response = httpx.post(f"{proxy.url}/compact/responses", json={"model": "gpt-5", "input": "just this"})
    assert response.json()["input"] == "just this"
    assert response.json()["tokens_before"] == response.json()["tokens_after"] > 0


def test_token_counts_include_what_rides_unseen(start_proxy: ProxyFactory, upstream: StandInUpstream) -> None:
    plain = [item_message("user", "hi")]
    with_reasoning = [*plain, {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "A" * 4000}]
    # A proxy of its own: the shared one may have calibrated gpt-5's counts to the stand-in's tokenizer already.
    with start_proxy() as proxy:
        compact = f"{proxy.url}/compact/responses"
        answers = [httpx.post(compact, json={"model": "gpt-5", "input": items}) for items in (plain, with_reasoning)]
    counts = [answer.json()["tokens_before"] for answer in answers]
    assert counts[1] - counts[0] >= 1000  # a token per 4 bytes of the reasoning item's JSON


def test_many_items_and_a_huge_output_are_compacted_validly(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    history = responses_agent_loop(15_000, output_chars=40)  # 45,000 items
    huge = 3 + 3 * 7000 + 2  # the output of round 7000
    history[huge] = {**history[huge], "output": [{"type": "input_text", "text": "x" * 4_000_000}]}
    body = {"model": "gpt-5", "input": history}
    response = httpx.post(f"{proxy.url}/v1/responses", json=body, headers=WINDOW, timeout=60)
    assert response.status_code == 200
    sent = upstream.last().json()["input"]
    assert pairing_problems(sent) == []
    assert sent[-3:] == history[-3:]  # the newest round whole
    assert history[huge] not in sent
    assert len(sent) < len(history) / 10


def test_metrics_name_the_wire_format(start_proxy: ProxyFactory, upstream: StandInUpstream) -> None:
    with start_proxy() as proxy:
        response = httpx.post(f"{proxy.url}/v1/responses", json={"model": "gpt-5", "input": "hi"})
        samples = scrape(proxy.url)
    tokens = int(response.headers["x-compaction-tokens-before"])
    assert samples.get("compaction_proxy_prompt_tokens_total", wire="responses", stage="before") == tokens
    assert samples.get("compaction_proxy_prompt_tokens_total", wire="chat.completions", stage="before") == 0
    assert samples.get("compaction_proxy_requests_total", route="/v1/responses", status="200") == 1
