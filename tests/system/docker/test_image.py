"""The image built from the Dockerfile and run for real, in a Docker engine of the tests' own: it answers
/healthz, forwards a chat completion to a stand-in upstream with its tokens counted while the container has
no network at all, runs as its unprivileged user and stops on SIGTERM with exit status 0.
"""

from __future__ import annotations

import errno
import http.client
import json
import os
import shlex
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from strategies.tokens import TokenCounter
from tests.support.netns import NetworkNamespace, SocketServer
from tests.support.upstream import StandInUpstream
from tests.system.docker.engine import Engine
from tests.system.test_packaging import dockerfile_instructions, final_stage

PROXY_PORT = 8080  # the image's COMPACTION_PORT
# The stand-in upstream listens on the container's own loopback, where nothing else does.
UPSTREAM_PORT = 9000
# The compose file's stop_grace_period: what a deployment gives the proxy to drain before SIGKILL.
GRACE_SECONDS = 30
MESSAGES = [{"role": "user", "content": "How many tokens is this question, counted without any network?"}]
BASE_PASSWD = Path("/usr/share/base-passwd")


def accounts(kind: str) -> tuple[set[str], set[int]]:
    """Names and ids in base-passwd's master file (passwd or group): what every Debian image already has."""
    entries = [line.split(":") for line in (BASE_PASSWD / f"{kind}.master").read_text().splitlines() if line]
    return {entry[0] for entry in entries}, {int(entry[2]) for entry in entries}


def created_accounts() -> dict[str, tuple[str, int]]:
    """{"groupadd": (name, gid), "useradd": (name, uid)} from the final stage's RUN."""
    found: dict[str, tuple[str, int]] = {}
    for keyword, arguments in final_stage():
        if keyword != "RUN":
            continue
        for command in arguments.split("&&"):
            argv = shlex.split(command)
            if argv and argv[0] in ("groupadd", "useradd"):
                option = "--gid" if argv[0] == "groupadd" else "--uid"
                found[argv[0]] = (argv[-1], int(argv[argv.index(option) + 1]))
    return found


@pytest.mark.skipif(not BASE_PASSWD.is_dir(), reason="not a Debian machine: no /usr/share/base-passwd to compare")
def test_the_images_user_and_group_are_new_to_debian() -> None:
    # Debian's base-passwd has a `proxy` user and group (id 13) in every Debian image: `groupadd proxy` fails.
    created = created_accounts()
    assert set(created) == {"groupadd", "useradd"}, created
    for command, kind in (("groupadd", "group"), ("useradd", "passwd")):
        name, number = created[command]
        names, numbers = accounts(kind)
        assert name not in names and number not in numbers, f"{command} {name} ({number}): Debian has it already"
    assert created["groupadd"][1] == created["useradd"][1] == 10001
    users = [arguments for keyword, arguments in dockerfile_instructions() if keyword == "USER"]
    assert users[-1] == "10001:10001"


def request(
    namespace: NetworkNamespace, method: str, path: str, body: object = None
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request to the proxy on the container's loopback."""
    connection = http.client.HTTPConnection("127.0.0.1", PROXY_PORT, timeout=60)
    connection.sock = namespace.connect("127.0.0.1", PROXY_PORT)
    try:
        headers = {"Authorization": "Bearer sk-test-key", "Content-Type": "application/json"}
        connection.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


@pytest.fixture
def container(engine: Engine, image: str) -> Iterator[str]:
    """The image run with no network (only its loopback), forwarding to the stand-in upstream's port there."""
    name = f"compaction-proxy-test-{os.getpid()}"
    engine.run(
        "run",
        "--detach",
        "--name",
        name,
        "--network=none",
        # The image's own health check, asked every second instead of every 30 s.
        "--health-interval=1s",
        image,
        "--upstream",
        f"http://127.0.0.1:{UPSTREAM_PORT}/v1",
    )
    try:
        yield name
    finally:
        engine.run("rm", "--force", name, check=False)


def wait_until_up(engine: Engine, container: str, namespace: NetworkNamespace) -> tuple[int, bytes]:
    deadline = time.monotonic() + 60  # hang guard
    while True:
        try:
            status, _, body = request(namespace, "GET", "/healthz")
            return status, body
        except ConnectionError:  # refused until uvicorn listens
            if engine.inspect(container, "{{.State.Running}}") != "true" or time.monotonic() > deadline:
                logs = engine.run("logs", container, check=False)
                pytest.fail(f"the proxy did not come up:\n{logs.stdout}{logs.stderr}")
            time.sleep(0.1)


def wait_until_healthy(engine: Engine, container: str) -> str:
    deadline = time.monotonic() + 60  # hang guard
    while (health := engine.inspect(container, "{{.State.Health.Status}}")) != "healthy":
        assert health == "starting" and time.monotonic() < deadline, f"docker health: {health}"
        time.sleep(0.2)
    return health


def test_the_image_serves_a_chat_completion_as_its_own_user_with_no_network_and_stops_on_sigterm(
    engine: Engine, container: str, report: list[str]
) -> None:
    pid = int(engine.inspect(container, "{{.State.Pid}}"))
    upstream = StandInUpstream()
    with NetworkNamespace(pid) as namespace:
        # No route to anywhere but the container's loopback: a tokenizer fetched on first use would fail.
        with pytest.raises(OSError) as unreachable:
            namespace.connect("1.1.1.1", 443, timeout=10)
        assert unreachable.value.errno == errno.ENETUNREACH, unreachable.value

        listener = namespace.tcp_socket()
        listener.bind(("127.0.0.1", UPSTREAM_PORT))
        with SocketServer(upstream.app, listener):
            healthz_status, healthz = wait_until_up(engine, container, namespace)
            assert (healthz_status, json.loads(healthz)) == (200, {"status": "ok"})
            health = wait_until_healthy(engine, container)

            # The container's first chat completion, so the first use of the tokenizer.
            status, headers, answer = request(
                namespace, "POST", "/v1/chat/completions", {"model": "gpt-4o", "messages": MESSAGES}
            )
    assert status == 200, answer
    tokens = TokenCounter().count_messages(MESSAGES, "gpt-4o")
    assert headers["x-compaction-tokens-before"] == headers["x-compaction-tokens-after"] == str(tokens)
    content = json.loads(answer)["choices"][0]["message"]["content"]
    assert content == "seen 1 messages"
    [forwarded] = upstream.received
    assert forwarded.path == "/v1/chat/completions" and forwarded.json()["messages"] == MESSAGES
    assert forwarded.headers["authorization"] == "Bearer sk-test-key"

    # The proxy itself (the container's PID 1), seen from the host: real, effective, saved and fs ids.
    fields = dict(line.partition(":")[::2] for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    assert fields["Uid"].split() == fields["Gid"].split() == ["10001"] * 4
    identity = engine.run("exec", container, "id").stdout.strip()
    assert identity.startswith("uid=10001(") and "gid=10001(" in identity, identity

    started = time.monotonic()
    engine.run("stop", "--time", str(GRACE_SECONDS), container, timeout=GRACE_SECONDS + 30)
    stopped_in = time.monotonic() - started
    # 0, not 137: it exited on SIGTERM, before docker's SIGKILL at the end of the grace period.
    exit_code = engine.inspect(container, "{{.State.ExitCode}}")
    assert exit_code == "0", engine.run("logs", container, check=False).stderr

    report.append(
        f"docker run --network=none: GET /healthz {healthz_status} {healthz.decode()}; docker health: {health}"
    )
    before, after = headers["x-compaction-tokens-before"], headers["x-compaction-tokens-after"]
    report.append(
        f"first chat completion (no route off the container's loopback): 200 {content!r},"
        f" X-Compaction-Tokens-Before/-After {before}/{after}"
    )
    report.append(f"runs as {identity}")
    report.append(f"docker stop --time {GRACE_SECONDS}: exit {exit_code} after {stopped_in:.1f} s")
