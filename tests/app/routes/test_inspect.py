"""GET /inspect on a proxy on loopback: off by default, behind the proxy keys, and what it shows of a known request
in each wire format, checked against what the stand-in upstream received.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from bench.compaction.wire_forms import messages_body
from strategies.conversation import text_of
from strategies.refs import ref_of
from tests.app.conftest import ProxyFactory
from tests.factories import agent_loop, responses_agent_loop
from tests.support.servers import LoopbackServer
from tests.support.upstream import StandInUpstream

KEY = "sk-proxy-inspect"
# The two oldest rounds' results masked, then the oldest rounds dropped by the window: all three actions at once.
CHAIN = "mask(keep=2,epoch=0,min_gain=0),window(budget=1900,low_water=0.9)"
ROUNDS, OUTPUT_CHARS = 20, 1500


def chat_request() -> tuple[str, bytes]:
    return "/v1/chat/completions", json.dumps(
        {"model": "gpt-4o", "messages": agent_loop(ROUNDS, OUTPUT_CHARS)}
    ).encode()


def chat_outputs(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: text_of(m["content"]) for m in body["messages"] if m["role"] == "tool"}


def responses_request() -> tuple[str, bytes]:
    return "/v1/responses", json.dumps({"model": "gpt-5", "input": responses_agent_loop(ROUNDS, OUTPUT_CHARS)}).encode()


def responses_outputs(body: dict[str, Any]) -> dict[str, str]:
    kinds = ("function_call_output", "custom_tool_call_output")
    return {item["call_id"]: _joined(item["output"]) for item in body["input"] if item.get("type") in kinds}


def _joined(output: str | list[dict[str, Any]]) -> str:
    """An output's text: a string, or its parts' texts one after the other (Codex's custom tool outputs)."""
    return output if isinstance(output, str) else "".join(part.get("text", "") for part in output)


def messages_request() -> tuple[str, bytes]:
    return "/v1/messages", messages_body(
        agent_loop(ROUNDS, OUTPUT_CHARS), {"model": "claude-sonnet-4-5", "max_tokens": 1024}
    )


def messages_outputs(body: dict[str, Any]) -> dict[str, str]:
    return {
        block["tool_use_id"]: block["content"] if isinstance(block["content"], str) else text_of(block["content"])
        for turn in body["messages"]
        if isinstance(turn["content"], list)
        for block in turn["content"]
        if block["type"] == "tool_result"
    }


FORMATS: dict[str, tuple[Callable[[], tuple[str, bytes]], Callable[[dict[str, Any]], dict[str, str]]]] = {
    "chat.completions": (chat_request, chat_outputs),
    "responses": (responses_request, responses_outputs),
    "messages": (messages_request, messages_outputs),
}


@pytest.fixture(scope="module")
def inspecting(start_proxy: ProxyFactory) -> Iterator[LoopbackServer]:
    with start_proxy(inspect_requests=3, api_keys=[KEY]) as server:
        yield server


def send(server: LoopbackServer, path: str, body: bytes, key: str = KEY, **headers: str) -> httpx.Response:
    auth = (
        {"x-api-key": key, "anthropic-version": "2023-06-01"}
        if path == "/v1/messages"
        else {"authorization": f"Bearer {key}"}
    )
    return httpx.post(
        f"{server.url}{path}", content=body, headers={**auth, **headers, "content-type": "application/json"}
    )


def inspect(server: LoopbackServer, query: str = "", key: str | None = KEY) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key is not None else {}
    return httpx.get(f"{server.url}/inspect{query}", headers=headers)


def test_off_by_default_it_says_so_in_the_error_shape(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    path, body = chat_request()
    assert (
        httpx.post(f"{proxy.url}{path}", content=body, headers={"content-type": "application/json"}).status_code == 200
    )
    answer = httpx.get(f"{proxy.url}/inspect")
    assert answer.status_code == 404
    error = answer.json()["error"]
    assert error["code"] == "inspect_off" and "inspect_requests" in error["message"]
    assert proxy.server.config.app.state.services.inspect is None  # nothing is kept anywhere


def test_behind_the_proxy_keys(inspecting: LoopbackServer, upstream: StandInUpstream) -> None:
    assert inspect(inspecting, key=None).status_code == 401
    assert inspect(inspecting, key="sk-wrong").status_code == 401
    answer = inspect(inspecting)
    assert answer.status_code == 200 and answer.json()["inspect_requests"] == 3
    assert KEY not in answer.text


@pytest.mark.parametrize("wire", FORMATS)
def test_shows_which_results_were_masked_with_which_refs_kept_or_dropped(
    inspecting: LoopbackServer, upstream: StandInUpstream, wire: str
) -> None:
    make, outputs = FORMATS[wire]
    path, body = make()
    sent = send(inspecting, path, body, **{"X-Compaction-Strategies": CHAIN, "X-Request-Id": f"inspect-{wire}"})
    assert sent.status_code == 200, sent.text
    original = outputs(json.loads(body))
    forwarded = outputs(upstream.last().json())

    (entry,) = inspect(inspecting, "?n=1").json()["requests"]
    assert (entry["request_id"], entry["wire"], entry["chain"]) == (f"inspect-{wire}", wire, CHAIN)
    assert entry["tokens_before"] == int(sent.headers["x-compaction-tokens-before"])
    assert entry["tokens_after"] == int(sent.headers["x-compaction-tokens-after"]) < entry["tokens_before"]
    results = {row["call_ids"][0]: row for row in entry["messages"] if row["role"] == "tool"}
    assert results.keys() == original.keys()
    seen = set()
    for call_id, row in results.items():
        seen.add(row["action"])
        assert row["chars_before"] == len(original[call_id])
        if row["action"] == "kept":
            assert forwarded[call_id] == original[call_id] and row["refs"] == [] and row["by"] == []
        elif row["action"] == "masked":
            assert row["refs"] == [ref_of(original[call_id])] and row["by"] == ["mask"]
            assert f'ref="{row["refs"][0]}"' in forwarded[call_id] == row["after"]
            assert row["chars_after"] == len(forwarded[call_id]) < 200
        else:
            assert row["action"] == "dropped" and row["by"] == ["window"] and call_id not in forwarded
            assert row["chars_after"] == 0 and row["at"] is None
    assert seen == {"kept", "masked", "dropped"}


def test_the_ring_keeps_the_newest_n_newest_first(inspecting: LoopbackServer, upstream: StandInUpstream) -> None:
    path, body = chat_request()
    for i in range(5):
        assert send(inspecting, path, body, **{"X-Request-Id": f"ring-{i}"}).status_code == 200
    entries = inspect(inspecting).json()["requests"]
    assert [e["request_id"] for e in entries] == ["ring-4", "ring-3", "ring-2"]
    assert [e["request_id"] for e in inspect(inspecting, "?n=2").json()["requests"]] == ["ring-4", "ring-3"]
    assert inspect(inspecting, "?n=0").json()["error"]["code"] == "invalid_n"
