"""Settings precedence (defaults < TOML < environment < flags) and start-up refusal of bad settings."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

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
    assert settings.default_strategies == "minify,mask,window"
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


UPSTREAM_SECRET = "sk-upstream-SECRET-0123456789"
# Each key would be spent by whoever reaches the port: the upstream ones on every request, the summariser one
# on every request that asks for the notes strategy.
UNGUARDED_KEYS = pytest.mark.parametrize("setting", ["upstream_api_key", "anthropic_api_key", "summariser_api_key"])


@UNGUARDED_KEYS
def test_a_key_of_the_proxy_without_proxy_keys_stops_create_app(setting: str) -> None:
    with pytest.raises(ConfigError, match="api_keys") as raised:
        create_app(Settings(**{setting: UPSTREAM_SECRET}))
    assert f"{setting} is set but api_keys is empty" in str(raised.value)
    assert "anyone who can reach the port" in str(raised.value)
    assert "allow_unauthenticated" in str(raised.value)
    assert UPSTREAM_SECRET not in str(raised.value)
    create_app(Settings(**{setting: UPSTREAM_SECRET, "api_keys": ["sk-proxy-1"]}))
    create_app(Settings(**{setting: UPSTREAM_SECRET, "allow_unauthenticated": True}))


@UNGUARDED_KEYS
def test_cli_refuses_to_start_as_an_open_relay(setting: str) -> None:
    result = run_cli(env={f"COMPACTION_{setting.upper()}": UPSTREAM_SECRET})
    assert result.returncode != 0
    assert "invalid settings" in result.stderr
    assert f"{setting} is set but api_keys is empty" in result.stderr
    assert "allow_unauthenticated" in result.stderr
    assert UPSTREAM_SECRET not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_api_keys_from_the_environment_toml_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPACTION_API_KEYS", " sk-a , sk-b,sk-c")
    assert [k.get_secret_value() for k in Settings().api_keys] == ["sk-a", "sk-b", "sk-c"]
    monkeypatch.setenv("COMPACTION_API_KEYS", '["sk-a,with-comma", "sk-b"]')
    assert [k.get_secret_value() for k in Settings().api_keys] == ["sk-a,with-comma", "sk-b"]
    monkeypatch.delenv("COMPACTION_API_KEYS")
    config = tmp_path / "proxy.toml"
    config.write_text('api_keys = ["sk-t1", "sk-t2"]\nupstream_api_key = "sk-up"\n')
    settings = Settings(config=config)
    assert [k.get_secret_value() for k in settings.api_keys] == ["sk-t1", "sk-t2"]
    assert settings.upstream_api_key.get_secret_value() == "sk-up"


def test_keys_never_print() -> None:
    settings = Settings(api_keys=["sk-proxy-PRINTED-1"], upstream_api_key="sk-upstream-PRINTED-2")
    for text in (str(settings), repr(settings), str(settings.model_dump())):
        assert "PRINTED" not in text
    with pytest.raises(ValidationError) as raised:
        Settings(api_keys=["sk-proxy-PRINTED-1", ""])
    assert "PRINTED" not in str(raised.value)


@pytest.mark.parametrize("value", ["sk-a,,sk-b", "sk-a, ", '["sk-a", ""]', "[not json"])
def test_unusable_api_keys_are_refused_without_echoing_them(value: str) -> None:
    result = run_cli(env={"COMPACTION_API_KEYS": value})
    assert result.returncode != 0
    assert "api_keys" in result.stderr
    assert "sk-a" not in result.stderr
    assert "Traceback" not in result.stderr
