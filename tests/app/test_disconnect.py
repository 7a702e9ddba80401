"""A client that goes away while its request is compacted stops the work (app.disconnect): no thread goes on
computing for nobody, and nothing is sent upstream.
"""

from __future__ import annotations

import json
import socket

from tests.app.conftest import ProxyFactory
from tests.support.holding import Holding
from tests.support.upstream import StandInUpstream


def test_the_compaction_stops_when_the_client_disconnects(start_proxy: ProxyFactory, upstream: StandInUpstream) -> None:
    holding = Holding()
    payload = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
        f"X-Compaction-Strategies: hold\r\nContent-Length: {len(payload)}\r\n\r\n"
    ).encode()
    with start_proxy(holding.registry) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port)) as client:
            client.sendall(head + payload)
            holding.wait_entered()
        holding.wait_stopped()
        assert holding.stopped == ["cancelled"]
        # The lane's thread is free again: the next request is compacted and answered.
        holding.release.set()
    assert upstream.received == []
