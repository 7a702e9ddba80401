"""Liveness (the readiness answer is in tests/app/server/test_serve.py, with the shutdown that changes it)."""

from __future__ import annotations

import httpx

from tests.support.servers import LoopbackServer


def test_healthz(proxy: LoopbackServer) -> None:
    response = httpx.get(f"{proxy.url}/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
