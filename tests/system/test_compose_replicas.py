"""docker-compose.yml's `replicas` profile: replicas of the proxy behind nginx. No Docker engine is needed:
the compose file is read with `docker-compose config`, and its nginx configuration runs for real on loopback
in front of two proxy processes, as the replicas, with the stand-in as their upstream.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.process import ProxyProcess, wait_for_output
from tests.support.servers import LoopbackServer, closed_port
from tests.support.upstream import StandInUpstream, sse_chunks
from tests.support.waiting import wait_for
from tests.system.test_packaging import clean_env, compose  # noqa: F401  (compose is a fixture)

STREAM = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def replicas_config(docker_compose: list[str]) -> dict[str, Any]:
    """The compose file as docker compose resolves it with the replicas profile on."""
    command = [*docker_compose, "--profile", "replicas", "config", "--format", "json"]
    result = subprocess.run(command, capture_output=True, text=True, env=clean_env())
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = json.loads(result.stdout)
    return config


@contextmanager
def nginx(site: str, folder: Path) -> Iterator[None]:
    """nginx in the foreground with one site configuration, as the lb service's image runs it."""
    binary = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if binary is None:
        pytest.fail("nginx not found; scripts/test installs it (apt-get install nginx)")
    (folder / "site.conf").write_text(site)
    # One process, no user switch: the temporary folders stay writable whoever runs the tests.
    (folder / "nginx.conf").write_text(
        f"daemon off; master_process off; pid {folder}/nginx.pid; error_log {folder}/error.log;\n"
        "events {}\n"
        f"http {{ access_log off; client_body_temp_path {folder}/body; proxy_temp_path {folder}/proxy;\n"
        f"  include {folder}/site.conf; }}\n"
    )
    process = subprocess.Popen([binary, "-p", str(folder), "-c", str(folder / "nginx.conf")], start_new_session=True)
    try:
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def worker_pid(proxies: list[ProxyProcess], arrived: threading.Condition, request_id: str) -> int:
    """The replica process that logged handling the request, once its line has been read (by a thread of its own)."""
    found: list[int] = []

    def logged() -> bool:
        entries = [json.loads(line) for proxy in proxies for line in proxy.lines]
        found[:] = [
            e["pid"] for e in entries if e["logger"] == "compaction_proxy.chat" and e["request_id"] == request_id
        ]
        return bool(found)

    wait_for_output(arrived, logged, 30, f"a replica to log {request_id}")
    return found[0]


def test_replicas_profile_puts_replicas_of_the_proxy_behind_a_load_balancer(
    compose: list[str],  # noqa: F811
) -> None:
    services = replicas_config(compose)["services"]
    replica, lb, proxy = services["replica"], services["lb"], services["proxy"]
    assert replica["deploy"]["replicas"] >= 2
    assert "ports" not in replica, "replicas publish no port of their own: only the load balancer does"
    assert replica["environment"] == proxy["environment"] and replica["build"] == proxy["build"]
    assert replica["profiles"] == lb["profiles"] == ["replicas"]
    assert {"target": 8080, "published": "8081"}.items() <= lb["ports"][0].items()
    assert lb["depends_on"]["replica"]["condition"] == "service_healthy"


def test_the_load_balancer_spreads_requests_over_replicas_and_relays_streams_as_they_arrive(
    compose: list[str],  # noqa: F811
    tmp_path: Path,
) -> None:
    site = replicas_config(compose)["configs"]["lb-nginx"]["content"]
    assert "server replica:8080;" in site and "listen 8080;" in site
    upstream = StandInUpstream()
    with LoopbackServer(upstream.app) as standin:
        args = ("--upstream", f"{standin.url}/v1")
        arrived = threading.Condition()  # notified of the lines of either replica
        with ProxyProcess(*args, arrived=arrived) as first, ProxyProcess(*args, arrived=arrived) as second:
            port = closed_port()
            # The two replicas that the name "replica" resolves to on the compose network.
            servers = f"server 127.0.0.1:{first.port};\n        server 127.0.0.1:{second.port};"
            site = site.replace("server replica:8080;", servers).replace("listen 8080;", f"listen 127.0.0.1:{port};")
            with nginx(site, tmp_path):
                url = f"http://127.0.0.1:{port}"
                wait_for(lambda: answers(url), timeout=30, what="nginx to answer through to a replica")
                pids = set()
                for index in range(6):
                    request_id = f"lb-{index}"
                    response = httpx.post(
                        f"{url}/v1/chat/completions",
                        json={**STREAM, "stream": False},
                        headers={"x-request-id": request_id},
                    )
                    assert response.status_code == 200
                    pids.add(worker_pid([first, second], arrived, request_id))
                assert len(pids) == 2, "every request went to the same replica"

                # Held after its first event by the upstream, a stream still shows that event to the client
                # through the load balancer, and then ends whole.
                upstream.stream_gate.clear()
                try:
                    with httpx.stream("POST", f"{url}/v1/chat/completions", json=STREAM, timeout=30) as response:
                        chunks = response.iter_raw()
                        received = next(chunks)
                        assert received == sse_chunks("gpt-4o", False)[0]
                        upstream.stream_gate.set()
                        received += b"".join(chunks)
                finally:
                    upstream.stream_gate.set()
                assert received == b"".join(sse_chunks("gpt-4o", False))
