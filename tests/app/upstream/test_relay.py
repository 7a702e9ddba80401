"""Faults on either side: timeouts, an upstream that breaks off mid-stream, a strategy that raises."""

from __future__ import annotations

import json
import zlib
from typing import Any

import httpx
import openai
import pytest

from app.upstream.models.usage import InputUsage, usage_in_body
from app.upstream.relay import DECODED_BYTES, UsageEnds
from strategies import BUILTINS, Context, Message, Params, Registry, Strategy
from tests.app.conftest import ProxyFactory
from tests.support.logs import captured_logs, parsed
from tests.support.metrics import scrape
from tests.support.servers import LoopbackServer, unanswered_port
from tests.support.upstream import Canned, StandInUpstream, sse_chunks

HI = [{"role": "user", "content": "hi"}]
STREAM = {"model": "gpt-4o", "stream": True, "messages": HI}


# --- timeouts --------------------------------------------------------------------------------------------


def test_connect_timeout_is_a_504(start_proxy: ProxyFactory) -> None:
    with unanswered_port(backlog_full=True) as port:
        with start_proxy(upstream_base_url=f"http://127.0.0.1:{port}/v1", connect_timeout=0.2) as proxy:
            # The client's own timeout is only a hang guard: the default connect timeout (10 s) would trip it.
            response = httpx.post(f"{proxy.url}/v1/chat/completions", json={"messages": HI}, timeout=8)
            assert response.status_code == 504
            assert response.json()["error"]["code"] == "upstream_timeout"
            assert scrape(proxy.url).get("compaction_proxy_upstream_errors_total", kind="timeout") == 1


def test_write_timeout_is_a_504(start_proxy: ProxyFactory) -> None:
    # Bigger than the loopback socket buffers of an upstream that accepts nothing and reads nothing.
    big = {"model": "gpt-4o", "messages": [{"role": "user", "content": "lorem ipsum dolor sit amet " * 320_000}]}
    with unanswered_port(backlog_full=False) as port:
        with start_proxy(upstream_base_url=f"http://127.0.0.1:{port}/v1", write_timeout=0.3) as proxy:
            response = httpx.post(
                f"{proxy.url}/v1/chat/completions",
                json=big,
                headers={"X-Compaction-Strategies": "none"},
                timeout=30,  # hang guard: the default write timeout (60 s) would trip it
            )
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"


def test_upstream_going_quiet_mid_stream_ends_the_clients_stream(
    start_proxy: ProxyFactory, upstream: StandInUpstream
) -> None:
    upstream.stream_gate.clear()  # the upstream sends its first chunk, then nothing
    try:
        with start_proxy(read_timeout=0.3) as proxy:
            client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-test", max_retries=0, timeout=30)
            stream = client.chat.completions.create(model="gpt-4o", messages=HI, stream=True)
            first = next(iter(stream))
            assert first.choices[0].delta.role == "assistant"
            with pytest.raises(openai.APIError) as raised:
                list(stream)
            assert raised.value.body == {
                "message": "The upstream API stopped sending before the response was complete.",
                "type": "upstream_error",
                "param": None,
                "code": "upstream_timeout",
            }
            # The proxy let go of the upstream response rather than leaving it open.
            assert upstream.stream_abandoned.wait(timeout=10)
            assert scrape(proxy.url).get("compaction_proxy_upstream_errors_total", kind="timeout") == 1
    finally:
        upstream.stream_gate.set()


# --- an upstream that breaks off -------------------------------------------------------------------------


def test_upstream_breaking_off_mid_stream_is_an_error_for_the_client(
    proxy: LoopbackServer, client: openai.OpenAI, upstream: StandInUpstream
) -> None:
    upstream.break_stream_after = 2
    stream = client.chat.completions.create(model="gpt-4o", messages=HI, stream=True)
    received = []
    with pytest.raises(openai.APIError) as raised:
        for chunk in stream:
            received.append(chunk)
    assert [c.choices[0].delta.content for c in received] == ["", "Hello"]
    assert raised.value.body == {
        "message": "The upstream API broke off the response before it was complete.",
        "type": "upstream_error",
        "param": None,
        "code": "upstream_broken_stream",
    }


def test_broken_stream_bytes_carry_an_error_event_and_no_done(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    upstream.break_stream_after = 2
    with captured_logs() as lines:
        response = httpx.post(f"{proxy.url}/v1/chat/completions", json=STREAM, timeout=30)
    assert response.status_code == 200
    expected = b"".join(sse_chunks("gpt-4o", False)[:2])
    assert response.content.startswith(expected)
    event = response.content[len(expected) :]
    assert event.startswith(b"data: ") and event.endswith(b"\n\n")
    assert json.loads(event[len(b"data: ") :])["error"]["code"] == "upstream_broken_stream"
    assert b"[DONE]" not in response.content

    # One warning line from the proxy, no traceback from anyone (uvicorn's lines included).
    proxy_lines = [e for e in parsed(lines) if e["logger"].startswith("compaction_proxy")]
    warnings = [e for e in proxy_lines if e["level"] == "warning"]
    assert len(warnings) == 1, warnings
    assert "broke off" in warnings[0]["message"] and "chat/completions" in warnings[0]["message"]
    assert not [e for e in parsed(lines) if "exc_info" in e or "Traceback" in e["message"]]


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/octet-stream", bytes(range(256)) * 8),
        # An SSE stream cut inside an event: an error event appended there would be glued to the broken one.
        ("text/event-stream", b'data: {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"content": "Hel'),
    ],
)
def test_a_body_cut_off_upstream_is_cut_off_for_the_client(
    proxy: LoopbackServer, upstream: StandInUpstream, content_type: str, body: bytes
) -> None:
    upstream.canned = Canned(200, body + b"never sent", {"content-type": content_type}, cut_after=len(body))
    with httpx.stream("GET", f"{proxy.url}/v1/files/file-1/content", timeout=30) as response:
        assert response.status_code == 200
        received = b""
        # A proxy that finished the message normally would hand over a shorter body that looks whole.
        with pytest.raises(httpx.RemoteProtocolError):
            for chunk in response.iter_raw():
                received += chunk
    assert received == body


def test_broken_streams_are_counted(start_proxy: ProxyFactory, upstream: StandInUpstream) -> None:
    with start_proxy() as proxy:
        upstream.break_stream_after = 1
        httpx.post(f"{proxy.url}/v1/chat/completions", json=STREAM, timeout=30)
        httpx.post(f"{proxy.url}/v1/chat/completions", json=STREAM, timeout=30)
        samples = scrape(proxy.url)
    assert samples.get("compaction_proxy_upstream_errors_total", kind="broken_stream") == 2
    assert samples.get("compaction_proxy_upstream_errors_total", kind="timeout") == 0


# --- a strategy that raises ------------------------------------------------------------------------------


class ExplodingParams(Params):
    pass


class Exploding(Strategy[ExplodingParams]):
    name = "exploding"
    params_model = ExplodingParams
    summary = "Raises, standing in for a strategy with a bug."

    def apply(self, messages: list[Message], ctx: Context) -> list[Message]:
        raise RuntimeError("strategy bug")


def exploding_registry() -> Registry:
    return Registry([*BUILTINS, Exploding])


def test_a_failing_strategy_forwards_the_request_uncompacted(
    start_proxy: ProxyFactory, upstream: StandInUpstream
) -> None:
    raw = b'{"model": "gpt-4o",  "messages": [{"role": "user", "content": "hi"}]}'
    with start_proxy(registry=exploding_registry(), default_strategies="exploding") as proxy:
        response = httpx.post(f"{proxy.url}/v1/chat/completions", content=raw)
        samples = scrape(proxy.url)
    assert response.status_code == 200
    assert response.headers["x-compaction-fallback"] == "strategy_error"
    assert response.json()["choices"][0]["message"]["content"] == "seen 1 messages"
    assert upstream.last().body == raw  # the original bytes
    assert samples.get("compaction_proxy_fallbacks_total", reason="strategy_error") == 1


def test_a_failing_strategy_can_fail_closed(start_proxy: ProxyFactory, upstream: StandInUpstream) -> None:
    with start_proxy(registry=exploding_registry(), on_strategy_error="fail") as proxy:
        client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-test", max_retries=0)
        with pytest.raises(openai.InternalServerError) as raised:
            client.chat.completions.create(
                model="gpt-4o", messages=HI, extra_headers={"X-Compaction-Strategies": "none,exploding"}
            )
        fine = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=HI)
    body: Any = raised.value.body
    assert raised.value.status_code == 500
    assert body["code"] == "compaction_failed"
    assert body["type"] == "server_error"
    assert "none,exploding" in body["message"]
    assert len(upstream.received) == 1  # only the request whose chain worked
    assert "x-compaction-fallback" not in fine.headers


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_the_usage_of_a_compressed_body_is_read_from_a_decoded_copy(encoding: str) -> None:
    body = b'{"id": "x", "choices": [], "usage": {"prompt_tokens": 1234}}' + b" " * 50_000
    wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
    packer = zlib.compressobj(wbits=wbits)
    packed = packer.compress(body) + packer.flush()
    ends = UsageEnds.of(encoding)
    assert ends is not None
    for start in range(0, len(packed), 7):  # as chunks arrive, cut anywhere
        ends.feed(packed[start : start + 7])
    read = ends.ends()
    assert read is not None and usage_in_body("chat.completions", read) == InputUsage(uncached=1234)


def test_a_body_that_decodes_past_the_bound_or_not_at_all_gives_no_usage() -> None:
    packer = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    bomb = packer.compress(b"\0" * (DECODED_BYTES + 1)) + packer.flush()  # about 64 KB on the wire
    ends = UsageEnds.of("gzip")
    assert ends is not None
    ends.feed(bomb)
    assert ends.ends() is None and ends.decoded <= DECODED_BYTES + 1
    broken = UsageEnds.of("gzip")
    assert broken is not None
    broken.feed(b"not gzip at all")
    assert broken.ends() is None
    assert UsageEnds.of("br") is None and UsageEnds.of("gzip, br") is None
