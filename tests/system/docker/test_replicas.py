"""docker-compose.yml's `replicas` profile brought up for real by `docker compose`, in the docker tests' own
engine: the image built by compose, two replicas behind nginx, sharing their notes through the Redis service,
forwarding to a stand-in upstream on this host.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from strategies.notes_fold import NOTES_HEADER
from tests.app.notes.test_runtime import NOTES, chat
from tests.support.netns import SocketServer
from tests.support.servers import closed_port
from tests.support.upstream import StandInUpstream
from tests.system.docker.engine import COMPOSE_FILE, ROOT, Engine

PROJECT = f"compaction-proxy-test-{os.getpid()}"
REQUESTS = 4


@pytest.fixture
def compose(engine: Engine, image: str, tmp_path: Path) -> Iterator[tuple[list[str], int]]:
    """`docker compose` arguments for the project, and the load balancer's port; the project is taken down
    (containers, network, volumes) afterwards."""
    port = closed_port()
    # The test's own changes to the file: this engine has no default bridge network (scripts/docker-engine),
    # so the build uses the host's; and the load balancer is published on a free loopback port instead of
    # on every interface at 8081.
    override = tmp_path / "compose.test.yml"
    override.write_text(
        "services:\n"
        "  replica:\n    build:\n      network: host\n"
        f'  lb:\n    ports: !override\n      - "127.0.0.1:{port}:8080"\n'
    )
    env_file = tmp_path / "empty.env"  # a developer's .env must not change what the test sees
    env_file.touch()
    arguments = ["compose", "--project-name", PROJECT, "--project-directory", str(ROOT), "--env-file", str(env_file)]
    arguments += ["--file", str(COMPOSE_FILE), "--file", str(override), "--profile", "replicas"]
    try:
        yield arguments, port
    finally:
        engine.run(*arguments, "down", "--volumes", "--remove-orphans", "--timeout", "30", timeout=120)


def served_by(engine: Engine, containers: list[str], request_ids: list[str]) -> dict[str, str]:
    """{request id: the replica container that logged it}."""
    found: dict[str, str] = {}
    for container in containers:
        logs = engine.run("logs", container)
        for line in (logs.stdout + logs.stderr).splitlines():
            entry = json.loads(line)
            if entry["logger"] == "compaction_proxy.chat" and entry.get("request_id") in request_ids:
                found[entry["request_id"]] = container
    return found


def test_compose_replicas_behind_nginx_share_their_notes_through_redis(
    engine: Engine, compose: tuple[list[str], int], report: list[str]
) -> None:
    arguments, port = compose
    # Redis first: it creates the project's network, whose gateway is this host's address on it.
    engine.run(*arguments, "up", "--detach", "--no-build", "redis")
    network = f"{PROJECT}_default"
    gateway = engine.run("network", "inspect", "--format", "{{(index .IPAM.Config 0).Gateway}}", network).stdout
    listener = socket.socket()
    listener.bind((gateway.strip(), 0))
    upstream = StandInUpstream()
    with SocketServer(upstream.app, listener) as standin:
        started = time.monotonic()
        # --wait: until the replicas pass the image's health check (nginx starts only then) and nginx runs.
        upstream_env = {"COMPACTION_UPSTREAM_BASE_URL": f"{standin.url}/v1"}
        engine.run(*arguments, "up", "--detach", "--build", "--wait", "lb", env=upstream_env, timeout=300)
        up_seconds = time.monotonic() - started

        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30  # hang guard: nginx listens a moment after it starts
        while True:
            try:
                healthz = httpx.get(f"{url}/healthz", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the load balancer does not answer"
                time.sleep(0.1)
        assert (healthz.status_code, healthz.json()) == (200, {"status": "ok"})

        # The same conversation, past the notes budget, four times in a row: nginx sends the requests to the
        # replicas in turn, and only the first makes the fold; the others find its notes in Redis.
        request_ids = [f"compose-{index}" for index in range(REQUESTS)]
        body = {"model": "gpt-4o", "messages": chat(11)}
        for request_id in request_ids:
            headers = {**NOTES, "Authorization": "Bearer sk-test-key", "X-Request-Id": request_id}
            response = httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers, timeout=60)
            assert response.status_code == 200, response.text
            assert "x-compaction-fallback" not in response.headers, response.headers
    assert len(upstream.summariser_calls) == 1
    sent = [received.json()["messages"] for received in upstream.received]
    assert len(sent) == REQUESTS and all(messages == sent[0] for messages in sent)
    assert sent[0][1]["content"].startswith(NOTES_HEADER)

    replicas = engine.run(*arguments, "ps", "--all", "--quiet", "replica").stdout.split()
    assert len(replicas) == 2, replicas
    served = served_by(engine, replicas, request_ids)
    assert set(served) == set(request_ids) and set(served.values()) == set(replicas), served

    # Each replica gets SIGTERM and the compose file's stop_grace_period before docker's SIGKILL (exit 137).
    engine.run(*arguments, "stop", timeout=120)
    exit_codes = [engine.inspect(replica, "{{.State.ExitCode}}") for replica in replicas]
    assert exit_codes == ["0", "0"]

    report.append(
        f"docker compose --profile replicas up --build --wait lb: {up_seconds:.0f} s;"
        f" GET /healthz through nginx: {healthz.status_code} {healthz.text}"
    )
    report.append(
        f"{REQUESTS} notes requests through nginx: served by {len(set(served.values()))} replicas,"
        f" {len(upstream.summariser_calls)} summariser call between them (notes shared in Redis)"
    )
    report.append(f"docker compose stop: replicas exit {', '.join(exit_codes)}")
