"""Logs as the process writes them: one JSON object per line, each line of a request with its id."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from app.server.logs import configure_logging
from tests.support.logs import captured_logs
from tests.support.process import ProxyProcess
from tests.support.upstream import Behaviour, Canned, StandInUpstream

CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


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
    assert all(e["chain"] == "minify,mask,window" and e["tokens_before"] > 0 for e in chat)
    [broken] = [e for e in entries if e["logger"] == "compaction_proxy.upstream"]
    assert broken["level"] == "warning" and broken["request_id"] == "client-trace-2"
    # httpcore's DEBUG lines quote every header, values included: quiet even at debug.
    assert not [e for e in entries if e["logger"].startswith(("httpcore", "hpack", "h2"))]


def test_no_key_or_cookie_in_any_line_at_debug(upstream: StandInUpstream) -> None:
    secrets = ["sk-live-secret", "session-cookie-secret", "__cf_bm=secret"]  # the last: the stand-in's set-cookie
    headers = {"Authorization": "Bearer sk-live-secret", "Cookie": "session=session-cookie-secret"}
    with ProxyProcess("--upstream", f"{upstream.url}/v1", "--log-level", "debug") as proxy:  # type: ignore[attr-defined]
        for path, body in [("/v1/chat/completions", CHAT), ("/v1/chat/completions", {**CHAT, "stream": True})]:
            assert httpx.post(f"{proxy.url}{path}", json=body, headers=headers).status_code == 200
        assert httpx.get(f"{proxy.url}/v1/models", headers=headers).status_code == 200
        assert upstream.last().headers["authorization"] == "Bearer sk-live-secret"  # forwarded, just never logged
        proxy.terminate()
        assert proxy.wait() == 0
    assert len(proxy.lines) > 5
    assert [line for line in proxy.lines if any(secret in line for secret in secrets)] == []


def test_the_handler_redacts_secret_header_values_from_any_logger(capsys: pytest.CaptureFixture[str]) -> None:
    with captured_logs():  # saves and restores the logging configuration around configure_logging
        configure_logging("debug", "text")
        logger = logging.getLogger("some.library")
        logger.debug("headers=%s", [(b"Authorization", b"Bearer sk-live-1"), (b"set-cookie", b"id=cookie-2")])
        logger.debug('sent {"x-api-key": "sk-ant-3", "cookie": "a=cookie-4"} and Proxy-Authorization: Basic cHc5')
        try:
            raise RuntimeError("upstream refused Authorization: Bearer sk-live-6")
        except RuntimeError:
            logger.exception("failed GET /v1/models?api_key=sk-query-7")
    output = capsys.readouterr().err
    assert "headers=[(b'Authorization', b'[redacted]'), (b'set-cookie', b'[redacted]')]" in output
    for secret in ["sk-live-1", "cookie-2", "sk-ant-3", "cookie-4", "cHc5", "sk-live-6", "sk-query-7"]:
        assert secret not in output
    assert "Traceback" in output and "RuntimeError" in output


def test_text_lines_carry_the_request_id_too(upstream: StandInUpstream) -> None:
    with ProxyProcess("--upstream", f"{upstream.url}/v1", "--log-format", "text") as proxy:  # type: ignore[attr-defined]
        httpx.post(f"{proxy.url}/v1/chat/completions", json=CHAT, headers={"X-Request-Id": "client-trace-9"})
        proxy.terminate()
        assert proxy.wait() == 0
    [line] = [line for line in proxy.lines if "compaction_proxy.chat" in line]
    assert " INFO compaction_proxy.chat [client-trace-9] chat.completions chain=minify,mask,window" in line
    assert not [line for line in proxy.lines if line.startswith("{")]


def test_start_up_names_the_upstream_without_credentials_and_a_404_without_v1_gets_a_hint(
    upstream: StandInUpstream,
) -> None:
    bare = str(upstream.url).replace("http://", "http://user:sk-in-url-secret@")  # type: ignore[attr-defined]
    not_found = {"error": {"message": "no such route", "type": "invalid_request_error"}}
    upstream.canned = Canned(404, json.dumps(not_found).encode(), {"content-type": "application/json"})
    with ProxyProcess("--upstream", bare) as proxy:
        answer = httpx.post(f"{proxy.url}/v1/chat/completions", json=CHAT)
        proxy.terminate()
        assert proxy.wait() == 0
    assert answer.status_code == 404
    assert answer.json() == not_found  # unchanged
    messages = [json.loads(line)["message"] for line in proxy.lines]
    [forwarding] = [m for m in messages if m.startswith("forwarding to ")]
    assert forwarding.startswith(f"forwarding to {upstream.url} (chat completions")  # type: ignore[attr-defined]
    assert f"  /v1/chat/completions -> {upstream.url}/chat/completions" in messages  # type: ignore[attr-defined]
    [hint] = [m for m in messages if "does not end in /v1" in m]
    assert f"want {upstream.url}/v1" in hint  # type: ignore[attr-defined]
    assert not [line for line in proxy.lines if "sk-in-url-secret" in line]


def test_context_window_flag_sets_the_window_assumed_and_says_so_once(upstream: StandInUpstream) -> None:
    history = [{"role": "user", "content": f"question {i} " * 200} for i in range(40)]
    upstream.behaviour = Behaviour(context_window=4096)  # and refuses what its own tokenizer counts past it
    with ProxyProcess("--upstream", f"{upstream.url}/v1", "--context-window", "4096") as proxy:  # type: ignore[attr-defined]
        answers = [
            httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "my-local-model", "messages": history})
            for _ in range(2)
        ]
        proxy.terminate()
        assert proxy.wait() == 0
    assert all(a.status_code == 200 and int(a.headers["x-compaction-tokens-after"]) < 4096 for a in answers)
    assert "x-compaction-retried" not in answers[0].headers  # fitted to the flag's window, not to a refusal
    counted = [r.prompt_tokens for r in upstream.received if r.method == "POST"]  # by the upstream's own tokenizer
    assert len(counted) == 2 and all(n is not None and n < 4096 for n in counted)
    assumed = [json.loads(line) for line in proxy.lines if "context window unknown" in line]
    assert len(assumed) == 1 and assumed[0]["level"] == "warning"
    assert "assuming 4096 tokens" in assumed[0]["message"] and "my-local-model" in assumed[0]["message"]
