from __future__ import annotations

import httpx

from tests.support.servers import LoopbackServer
from tests.support.upstream import StandInUpstream


def test_compact_is_a_dry_run_with_per_step_stats(proxy: LoopbackServer, upstream: StandInUpstream) -> None:
    messages = [
        {"role": "user", "content": "summarise the logs"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "logs", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "line\n" * 2000},
    ]
    response = httpx.post(
        f"{proxy.url}/compact",
        json={"model": "gpt-4o", "messages": messages},
        headers={"X-Compaction-Strategies": "none,prune_tool_outputs(max_chars=100)"},
    )
    assert response.status_code == 200
    report = response.json()
    assert [s["strategy"] for s in report["steps"]] == ["none", "prune_tool_outputs"]
    first, second = report["steps"]
    assert first["tokens_before"] == first["tokens_after"] == report["tokens_before"]
    assert second["tokens_before"] == report["tokens_before"] > second["tokens_after"] == report["tokens_after"]
    assert all(s["ms"] >= 0 for s in report["steps"])
    assert report["messages"][2]["content"].startswith("line\n" * 20)
    assert "[... output truncated ...]" in report["messages"][2]["content"]
    assert report["messages"][:2] == messages[:2]
    assert response.headers["x-compaction-tokens-after"] == str(report["tokens_after"])
    assert upstream.received == []


def test_compact_rejects_what_chat_completions_rejects(proxy: LoopbackServer) -> None:
    response = httpx.post(f"{proxy.url}/compact", content=b"not json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


def test_healthz(proxy: LoopbackServer) -> None:
    response = httpx.get(f"{proxy.url}/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
