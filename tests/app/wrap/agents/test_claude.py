from __future__ import annotations

import json
from pathlib import Path

from app.wrap.agents import Upstreams
from app.wrap.agents.claude import ClaudeCode
from tests.support.files import digests

PROXY = "http://127.0.0.1:4321"
FORWARDS = Upstreams("https://api.openai.com/v1", "https://api.anthropic.com")


def _settings(path: Path, base_url: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": base_url}, "model": "opus"}))


def test_the_proxy_goes_in_the_environment_and_in_settings_that_outrank_the_users_files(tmp_path: Path) -> None:
    _settings(tmp_path / "home/.claude/settings.json", "https://gateway.example")
    before = digests(tmp_path)
    env = {"HOME": str(tmp_path / "home"), "ANTHROPIC_BASE_URL": "https://other.example", "ANTHROPIC_API_KEY": "k"}
    launch = ClaudeCode().launch(["-p", "hi"], PROXY, FORWARDS, env, tmp_path)
    assert launch.argv[0] == "claude" and launch.argv[-2:] == ["-p", "hi"]
    assert launch.argv[1] == "--settings" and json.loads(launch.argv[2]) == {"env": {"ANTHROPIC_BASE_URL": PROXY}}
    assert launch.env == {**env, "ANTHROPIC_BASE_URL": PROXY}  # no /v1: Claude Code adds it
    assert digests(tmp_path) == before


def test_its_upstream_is_what_its_settings_files_say_over_the_environment(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    env = {"HOME": str(home), "ANTHROPIC_BASE_URL": "https://env.example/"}
    assert ClaudeCode().upstreams(env, project) == Upstreams(anthropic="https://env.example")
    _settings(home / ".claude/settings.json", "https://user.example")
    assert ClaudeCode().upstreams(env, project).anthropic == "https://user.example"
    _settings(project / ".claude/settings.json", "https://project.example")
    assert ClaudeCode().upstreams(env, project).anthropic == "https://project.example"
    _settings(project / ".claude/settings.local.json", "https://local.example")
    assert ClaudeCode().upstreams(env, project).anthropic == "https://local.example"


def test_claude_config_dir_moves_the_user_settings_and_a_broken_file_is_passed_over(tmp_path: Path) -> None:
    _settings(tmp_path / "elsewhere/settings.json", "https://moved.example")
    (tmp_path / "project/.claude").mkdir(parents=True)
    (tmp_path / "project/.claude/settings.json").write_text("{not json")
    env = {"HOME": str(tmp_path / "home"), "CLAUDE_CONFIG_DIR": str(tmp_path / "elsewhere")}
    assert ClaudeCode().upstreams(env, tmp_path / "project").anthropic == "https://moved.example"
    assert ClaudeCode().upstreams({"HOME": str(tmp_path / "home")}, tmp_path / "project") == Upstreams()
