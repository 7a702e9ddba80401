"""Settings precedence (defaults < TOML < environment < flags) and start-up refusal of bad settings."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app import ConfigError, Settings, create_app
from tests.support.servers import closed_port


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "proxy.toml"
    path.write_text(
        'port = 9001\nupstream_base_url = "http://file.example/v1/"\ndefault_strategies = "prune_tool_outputs"\n'
        "[strategies.prune_tool_outputs]\nmax_chars = 500\n"
    )
    return path


def test_defaults() -> None:
    settings = Settings()
    assert settings.upstream_base_url == "https://api.openai.com/v1"
    assert settings.default_strategies == "shorten_tools"
    assert (settings.host, settings.port) == ("127.0.0.1", 8080)


def test_file_overrides_defaults(config_file: Path) -> None:
    settings = Settings(config=config_file)
    assert settings.port == 9001
    assert settings.upstream_base_url == "http://file.example/v1"  # trailing slash normalised
    assert settings.strategies == {"prune_tool_outputs": {"max_chars": 500}}


def test_environment_overrides_file_and_flags_override_environment(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPACTION_CONFIG", str(config_file))
    monkeypatch.setenv("COMPACTION_PORT", "9002")
    monkeypatch.setenv("COMPACTION_UPSTREAM_BASE_URL", "http://env.example/v1")
    assert Settings().port == 9002
    assert Settings().default_strategies == "prune_tool_outputs"  # from the file named by the environment
    assert Settings(port=9003).port == 9003
    assert Settings(upstream_base_url="http://flag.example/v1").upstream_base_url == "http://flag.example/v1"


def test_strategy_parameters_from_the_environment_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPACTION_STRATEGIES", '{"shorten_tools": {"full_tool_outputs": 4}}')
    assert Settings().strategies == {"shorten_tools": {"full_tool_outputs": 4}}


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        (dict(default_strategies="shorten_tools,bogus"), "default_strategies"),
        (dict(default_strategies="shorten_tools("), "default_strategies"),
        (dict(strategies={"shorten_tools": {"full_tool_outputs": -1}}), "strategies.shorten_tools"),
        (dict(strategies={"nope": {}}), "strategies.nope"),
    ],
)
def test_unusable_strategy_settings_stop_create_app(settings: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        create_app(Settings(**settings))


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--upstream", "ftp://nowhere"], {}, "upstream_base_url"),
        (["--port", "70000"], {}, "port"),
        ([], {"COMPACTION_READ_TIMEOUT": "soon"}, "read_timeout"),
        ([], {"COMPACTION_DEFAULT_STRATEGIES": "shorten_tools(max_tool_chars=lots"}, "default_strategies"),
        (["--config", "/nonexistent/proxy.toml"], {}, "/nonexistent/proxy.toml"),
    ],
)
def test_cli_refuses_to_start_naming_the_bad_setting(args: list[str], env: dict[str, str], named: str) -> None:
    result = run_cli(*args, env=env)
    assert result.returncode != 0
    assert "invalid settings" in result.stderr
    assert named in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_serves(tmp_path: Path) -> None:
    port = closed_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/healthz")
                break
            except httpx.TransportError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline, "the proxy did not start"
                time.sleep(0.1)
        assert response.json() == {"status": "ok"}
        assert "server" not in response.headers
    finally:
        process.terminate()
        process.wait(timeout=15)
