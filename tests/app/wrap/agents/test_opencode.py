from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.wrap.agents import Upstreams
from app.wrap.agents.opencode import CONTENT, OpenCode, loads_jsonc
from tests.support.files import digests

PROXY = "http://127.0.0.1:4321"
OPENAI, ANTHROPIC = "https://api.openai.com/v1", "https://api.anthropic.com"
LOCAL = {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": "http://localhost:8080/v1/", "apiKey": "k"}}


def _write(path: Path, config: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config))


def _inline(env: dict[str, str]) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(env[CONTENT])
    return parsed


def test_jsonc_comments_and_trailing_commas_go_and_strings_stay_whole() -> None:
    text = (
        '{\n  // a comment\n  "url": "http://x.example/v1", /* another, */ "list": [1, 2,],\n  "s": "a /* b */ c",\n}'
    )
    assert loads_jsonc(text) == {"url": "http://x.example/v1", "list": [1, 2], "s": "a /* b */ c"}


def test_the_built_in_providers_are_pointed_at_the_proxy_inline_and_no_file_changes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _write(home / ".config/opencode/opencode.json", {"model": "anthropic/claude-sonnet-4-5", "theme": "x"})
    before = digests(tmp_path)
    env = {"HOME": str(home)}
    assert OpenCode().upstreams(env, tmp_path) == Upstreams()  # the built-in provider's own API
    launch = OpenCode().launch(["run", "hi"], PROXY, Upstreams(OPENAI, ANTHROPIC), env, tmp_path)
    assert launch.argv == ["opencode", "run", "hi"] and launch.notes == []
    assert _inline(launch.env) == {
        "provider": {name: {"options": {"baseURL": f"{PROXY}/v1"}} for name in ("openai", "anthropic")}
    }
    assert digests(tmp_path) == before


def test_the_configured_models_own_provider_is_the_upstream_and_goes_through_the_proxy(tmp_path: Path) -> None:
    project = tmp_path / "repo/sub"
    (tmp_path / "repo/.git").mkdir(parents=True)
    _write(tmp_path / "home/.config/opencode/opencode.json", {"provider": {"local": LOCAL}})
    _write(tmp_path / "repo/opencode.json", {"model": "local/qwen"})  # the repository's root, above the project
    env = {"HOME": str(tmp_path / "home")}
    found = OpenCode().upstreams(env, project)
    assert found == Upstreams(openai="http://localhost:8080/v1")
    launch = OpenCode().launch([], PROXY, Upstreams(found.openai, ANTHROPIC), env, project)
    # The built-in openai provider still goes to OpenAI, which this proxy does not forward to: left alone.
    assert _inline(launch.env)["provider"] == {
        "local": {"options": {"baseURL": f"{PROXY}/v1"}},
        "anthropic": {"options": {"baseURL": f"{PROXY}/v1"}},
    }


def test_a_provider_going_elsewhere_is_left_alone_and_said(tmp_path: Path) -> None:
    other = {**LOCAL, "options": {"baseURL": "http://gpu-box:9000/v1"}}
    _write(tmp_path / "custom.json", {"provider": {"local": LOCAL, "gpu": other}, "model": "local/qwen"})
    env = {"HOME": str(tmp_path / "home"), "OPENCODE_CONFIG": str(tmp_path / "custom.json")}
    launch = OpenCode().launch([], PROXY, Upstreams("http://localhost:8080/v1", ANTHROPIC), env, tmp_path)
    assert set(_inline(launch.env)["provider"]) == {"local", "anthropic"}
    assert launch.notes == ["opencode's provider 'gpu' goes elsewhere than the proxy forwards: not through it"]


def test_the_users_own_inline_config_is_kept_and_its_provider_followed(tmp_path: Path) -> None:
    mine = {"model": "local/qwen", "provider": {"local": LOCAL}, "permission": {"bash": "allow"}}
    env = {"HOME": str(tmp_path), CONTENT: json.dumps(mine)}
    assert OpenCode().upstreams(env, tmp_path).openai == "http://localhost:8080/v1"
    inline = _inline(OpenCode().launch([], PROXY, Upstreams("http://localhost:8080/v1", ANTHROPIC), env, tmp_path).env)
    assert inline["permission"] == {"bash": "allow"} and inline["model"] == "local/qwen"
    assert inline["provider"]["local"] == {**LOCAL, "options": {**LOCAL["options"], "baseURL": f"{PROXY}/v1"}}


def test_an_anthropic_provider_of_the_users_is_the_anthropic_upstream_without_v1(tmp_path: Path) -> None:
    gateway = {"npm": "@ai-sdk/anthropic", "options": {"baseURL": "https://gateway.example/v1"}}
    _write(tmp_path / "opencode.json", {"model": "corp/claude", "provider": {"corp": gateway}})
    assert OpenCode().upstreams({"HOME": str(tmp_path / "h")}, tmp_path) == Upstreams(
        anthropic="https://gateway.example"
    )
