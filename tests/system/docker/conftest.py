"""One Docker engine per session for the tests that build and run the image, made with the README's recipe
(scripts/docker-engine, scripts/docker-base-images), and what they measured, shown at the end of the run.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.required import require
from tests.system.docker.engine import IMAGE, ROOT, Engine, docker_cli, unavailable

REPORT = pytest.StashKey[list[str]]()
# Passed on to the build by name only, so their values are neither on a command line nor in the image:
# docker leaves these predefined build arguments out of the image's history.
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy")


@pytest.fixture(scope="session")
def report(request: pytest.FixtureRequest) -> list[str]:
    """Lines for the `docker` section of the terminal summary."""
    return request.config.stash.setdefault(REPORT, [])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    lines = config.stash.get(REPORT, [])
    if lines:
        terminalreporter.ensure_newline()  # else the first line would follow a blank one
        terminalreporter.section("docker")
        for line in lines:
            terminalreporter.write_line(line)


def tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.splitlines()[-lines:])


@pytest.fixture(scope="session")
def engine() -> Iterator[Engine]:
    reason = unavailable()
    require(reason is None, reason or "")
    cli = docker_cli()
    assert cli is not None
    # Under /tmp, not pytest's base temp: the engine's sockets live in it, and socket paths are short.
    engine = Engine(cli, Path(tempfile.mkdtemp(prefix="cp-docker-")))
    try:
        started = engine.script("docker-engine", "start", str(engine.directory), timeout=120)
        require(started.returncode == 0, f"no Docker engine can be started on this machine:\n{tail(started.stderr)}")
        engine.link_compose_plugin()
        yield engine
    finally:
        stopped = engine.script("docker-engine", "stop", str(engine.directory), timeout=180)
        assert stopped.returncode == 0 and not engine.directory.exists(), stopped.stderr
        assert stopped.stderr == "", f"the engine did not stop cleanly:\n{stopped.stderr}"


@pytest.fixture(scope="session")
def base_images(engine: Engine, report: list[str]) -> None:
    started = time.monotonic()
    made = engine.script("docker-base-images", timeout=600)
    if made.returncode != 0:
        pytest.fail(f"scripts/docker-base-images failed:\n{tail(made.stdout)}\n{tail(made.stderr, 60)}")
    names = ", ".join(line.removeprefix("docker-base-images: ") for line in made.stdout.splitlines())
    report.append(f"stand-in base images (mmdebstrap, Debian bookworm): {names}: {time.monotonic() - started:.0f} s")


@pytest.fixture(scope="session")
def image(engine: Engine, base_images: None, report: list[str]) -> str:
    """The image built from the Dockerfile as it is, the README's way, on this machine's network."""
    proxies = [arg for name in PROXY_VARIABLES if name in os.environ for arg in ("--build-arg", name)]
    started = time.monotonic()
    built = engine.run(
        "build", "--network=host", "--progress=plain", "--tag", IMAGE, *proxies, str(ROOT), timeout=900, check=False
    )
    seconds = time.monotonic() - started
    if built.returncode != 0:
        pytest.fail(f"docker build failed:\n{tail(built.stdout + built.stderr, 60)}")
    size = int(engine.run("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout)
    report.append(f"docker build: {seconds:.0f} s; {IMAGE}: {size / 1e6:.0f} MB")
    return IMAGE
