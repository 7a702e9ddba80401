"""Logs as the process writes them: one JSON object per line, each line of a request with its id."""

from __future__ import annotations

import json

import httpx

from tests.support.process import ProxyProcess
from tests.support.upstream import StandInUpstream

CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
REQUEST_TIME = ("connect_tcp", "send_request", "receive_response")  # httpcore's lines while forwarding


def test_json_lines_with_the_request_id_on_every_line_of_a_request(upstream: StandInUpstream) -> None:
    with ProxyProcess("--upstream", f"{upstream.url}/v1", "--log-level", "debug") as proxy:  # type: ignore[attr-defined]
        url = f"{proxy.url}/v1/chat/completions"
        httpx.post(url, json=CHAT, headers={"X-Request-Id": "client-trace-1"})
        upstream.break_stream_after = 1
        httpx.post(url, json={**CHAT, "stream": True}, headers={"X-Request-Id": "client-trace-2"})
        upstream.break_stream_after = None
        generated = httpx.post(url, json=CHAT).headers["x-compaction-request-id"]
        proxy.terminate()
        assert proxy.wait() == 0

    entries = [json.loads(line) for line in proxy.lines]  # fails on any line that is not JSON
    assert entries
    for entry in entries:
        assert {"time", "level", "logger", "message", "request_id"} <= set(entry), entry
    # uvicorn's own lines come through the same formatter; outside any request they have no id.
    startup = [e for e in entries if e["logger"].startswith("uvicorn") and "startup complete" in e["message"]]
    assert startup and startup[0]["request_id"] is None

    ids = {"client-trace-1", "client-trace-2", generated}
    chat = [e for e in entries if e["logger"] == "compaction_proxy.chat"]
    assert sorted(e["request_id"] for e in chat) == sorted(ids)
    assert all(e["chain"] == "minify,dedupe,window" and e["tokens_before"] > 0 for e in chat)
    [broken] = [e for e in entries if e["logger"] == "compaction_proxy.upstream"]
    assert broken["level"] == "warning" and broken["request_id"] == "client-trace-2"
    forwarding = [e for e in entries if e["logger"].startswith("httpcore") and e["message"].startswith(REQUEST_TIME)]
    assert forwarding
    assert {e["request_id"] for e in forwarding} == ids


def test_text_lines_carry_the_request_id_too(upstream: StandInUpstream) -> None:
    with ProxyProcess("--upstream", f"{upstream.url}/v1", "--log-format", "text") as proxy:  # type: ignore[attr-defined]
        httpx.post(f"{proxy.url}/v1/chat/completions", json=CHAT, headers={"X-Request-Id": "client-trace-9"})
        proxy.terminate()
        assert proxy.wait() == 0
    [line] = [line for line in proxy.lines if "compaction_proxy.chat" in line]
    assert " INFO compaction_proxy.chat [client-trace-9] chat.completions chain=minify,dedupe,window" in line
    assert not [line for line in proxy.lines if line.startswith("{")]
