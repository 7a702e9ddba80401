"""Notes shared as users deploy them: proxy processes (`python -m app`) sharing a real Redis server, and a
proxy restarted on the same SQLite file.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from strategies.notes_fold import NOTES_HEADER
from tests.app.notes.test_runtime import NOTES, chat, wait_for
from tests.support.process import ProxyProcess
from tests.support.upstream import StandInUpstream


def proxy_env(upstream: StandInUpstream, cache_url: str) -> dict[str, str]:
    return {"COMPACTION_UPSTREAM_BASE_URL": f"{upstream.url}/v1", "COMPACTION_CACHE_URL": cache_url}  # type: ignore[attr-defined]


def post(proxy: ProxyProcess, pairs: int) -> httpx.Response:
    body = {"model": "gpt-4o", "messages": chat(pairs)}
    headers = {**NOTES, "Authorization": "Bearer sk-test-key"}
    response = httpx.post(f"{proxy.url}/v1/chat/completions", json=body, headers=headers, timeout=60)
    assert response.status_code == 200, response.text
    return response


def test_two_proxy_processes_sharing_redis_make_one_summariser_call(upstream: StandInUpstream, redis_url: str) -> None:
    upstream.summariser_gate.clear()
    env = proxy_env(upstream, redis_url)
    with ProxyProcess(env=env) as first, ProxyProcess(env=env) as second, ThreadPoolExecutor(2) as pool:
        one = pool.submit(post, first, 11)
        wait_for(lambda: len(upstream.summariser_calls) == 1)
        other = pool.submit(post, second, 11)  # the same fold, while the first process is making it
        time.sleep(1.0)  # without the shared lock, the second call arrives in this window
        assert len(upstream.summariser_calls) == 1
        upstream.summariser_gate.set()
        responses = [one.result(timeout=60), other.result(timeout=60)]
        assert all("x-compaction-fallback" not in r.headers for r in responses)
        post(second, 12)  # the next request of the conversation, on either process: no call at all
    assert len(upstream.summariser_calls) == 1
    bodies = [r.json()["messages"] for r in upstream.received]
    assert len(bodies) == 3 and bodies[0] == bodies[1]
    assert all(body[1]["content"].startswith(NOTES_HEADER) for body in bodies)


def test_a_restarted_proxy_reuses_its_notes_from_sqlite(upstream: StandInUpstream, tmp_path: Path) -> None:
    env = proxy_env(upstream, f"sqlite://{tmp_path}/notes.db")
    with ProxyProcess(env=env) as proxy:
        post(proxy, 11)
    assert len(upstream.summariser_calls) == 1
    with ProxyProcess(env=env) as restarted:
        post(restarted, 11)
        post(restarted, 12)
    assert len(upstream.summariser_calls) == 1
    first, again, _ = [r.json()["messages"] for r in upstream.received]
    assert again == first and first[1]["content"].startswith(NOTES_HEADER)
