"""A real Redis server for the tests: redis-server from the system (Debian's redis-server package) on a free
loopback port, without persistence, stopped afterwards. Missing, it fails the test: it is not optional.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

from tests.support.servers import closed_port

INSTALL = "apt-get install -y redis-server"


def redis_binary() -> str:
    found = shutil.which("redis-server") or shutil.which("redis-server", path="/usr/sbin:/usr/bin")
    if found is None:
        pytest.fail(f"redis-server is not installed; the shared notes cache is tested on a real one: {INSTALL}")
    return found


@contextmanager
def redis_server() -> Iterator[str]:
    """A running redis-server; yields its URL (database 0)."""
    port = closed_port()  # redis-server cannot pick a port itself (--port 0 disables TCP)
    process = subprocess.Popen(
        [redis_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 15
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    process.kill()
                    output = process.communicate()[0]
                    pytest.fail(f"redis-server did not start on port {port}:\n{output}")
                time.sleep(0.05)
        client.close()
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
