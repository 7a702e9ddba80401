"""The correlation id: the client's X-Request-Id (sanitised) or a fresh one, in X-Compaction-Request-Id."""

from __future__ import annotations

import re

import httpx
import openai
import pytest

from tests.support.servers import LoopbackServer
from tests.support.upstream import StandInUpstream

HI = [{"role": "user", "content": "hi"}]
CHAT = {"model": "gpt-4o", "messages": HI}


def test_the_clients_id_comes_back_and_the_upstreams_passes_unchanged(
    client: openai.OpenAI, upstream: StandInUpstream
) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=HI, extra_headers={"X-Request-Id": "trace-2024.07:abc_DEF-1"}
    )
    assert raw.headers["x-compaction-request-id"] == "trace-2024.07:abc_DEF-1"
    assert raw.headers["x-request-id"] == "req_standin_123"  # the upstream's own, as users quote it
    assert raw.request_id == "req_standin_123"  # what the SDK reports
    assert upstream.last().headers["x-request-id"] == "trace-2024.07:abc_DEF-1"  # forwarded untouched


def test_without_one_a_fresh_id_is_generated(proxy: LoopbackServer) -> None:
    ids = [httpx.post(f"{proxy.url}/v1/chat/completions", json=CHAT).headers["x-compaction-request-id"] for _ in "ab"]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids), ids
    assert ids[0] != ids[1]


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        (b"a" * 300, "a" * 128),
        (b"trace one\ttwo", "traceonetwo"),
        (b"caf\xc3\xa9-\xff-id", "caf--id"),
    ],
)
def test_the_clients_id_is_sanitised(proxy: LoopbackServer, sent: bytes, expected: str) -> None:
    response = httpx.post(f"{proxy.url}/v1/chat/completions", json=CHAT, headers={"X-Request-Id": sent})
    assert response.headers["x-compaction-request-id"] == expected


def test_an_id_with_nothing_printable_is_replaced(proxy: LoopbackServer) -> None:
    response = httpx.get(f"{proxy.url}/healthz", headers={"X-Request-Id": b"\xe9 \t\x80"})
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-compaction-request-id"])


def test_every_answer_carries_the_id(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    headers = {"X-Request-Id": "rid-7"}
    stream = {**CHAT, "stream": True}
    answers = [
        httpx.post(f"{proxy.url}/v1/chat/completions", json=stream, headers=headers),
        httpx.post(f"{proxy.url}/v1/chat/completions", content=b"{", headers=headers),  # the proxy's own 400
        httpx.get(f"{proxy.url}/nowhere", headers=headers),
        httpx.get(f"{proxy.url}/metrics", headers=headers),
    ]
    assert [a.headers.get_list("x-compaction-request-id") for a in answers] == [["rid-7"]] * 4
