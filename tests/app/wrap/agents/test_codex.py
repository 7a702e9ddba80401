from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from app.wrap.agents import Upstreams, WrapError
from app.wrap.agents.codex import Codex
from tests.support.files import digests

PROXY = "http://127.0.0.1:4321"
FORWARDS = Upstreams("https://api.openai.com/v1", "https://api.anthropic.com")
CUSTOM = """model_provider = "standin"
[model_providers.standin]
name = "standin"
base_url = "http://models.example:8000/v1/"
wire_api = "responses"
[model_providers.other]
base_url = "http://other.example/v1"
[profiles.work]
model_provider = "other"
"""


def _override(argv: list[str]) -> tuple[str, str]:
    """The -c override wrap put first: its key and the value as Codex reads it (TOML)."""
    assert argv[:2] == ["codex", "-c"]
    key, _, value = argv[2].partition("=")
    return key, tomllib.loads(f"v = {value}")["v"]


def test_the_built_in_provider_is_pointed_at_the_proxy_by_a_command_line_override(tmp_path: Path) -> None:
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex/config.toml").write_text('openai_base_url = "https://corp.example/v1"\n')
    before = digests(tmp_path)
    env = {"HOME": str(tmp_path), "OPENAI_API_KEY": "k"}
    assert Codex().upstreams(env, tmp_path) == Upstreams(openai="https://corp.example/v1")
    launch = Codex().launch(["exec", "hi"], PROXY, FORWARDS, env, tmp_path)
    assert _override(launch.argv) == ("openai_base_url", f"{PROXY}/v1") and launch.argv[3:] == ["exec", "hi"]
    assert launch.env == env
    assert digests(tmp_path) == before
    assert Codex().upstreams({"HOME": str(tmp_path / "nobody")}, tmp_path) == Upstreams()  # no config: OpenAI's


def test_a_provider_of_the_users_own_is_overridden_where_it_is_defined(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(CUSTOM)
    env = {"CODEX_HOME": str(tmp_path), "HOME": "/nonexistent"}
    assert Codex().upstreams(env, tmp_path) == Upstreams(openai="http://models.example:8000/v1")
    launch = Codex().launch([], PROXY, FORWARDS, env, tmp_path)
    assert _override(launch.argv) == ("model_providers.standin.base_url", f"{PROXY}/v1")


def test_the_profile_config_toml_picks_names_the_provider(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('profile = "work"\n' + CUSTOM)
    env = {"CODEX_HOME": str(tmp_path)}
    assert Codex().upstreams(env, tmp_path).openai == "http://other.example/v1"
    assert _override(Codex().launch([], PROXY, FORWARDS, env, tmp_path).argv)[0] == "model_providers.other.base_url"


def test_a_provider_without_a_base_url_is_refused_saying_which(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('model_provider = "oss"\n')
    with pytest.raises(WrapError, match="'oss' has no base_url"):
        Codex().upstreams({"CODEX_HOME": str(tmp_path)}, tmp_path)
