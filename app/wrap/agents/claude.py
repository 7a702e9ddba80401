"""Claude Code: ANTHROPIC_BASE_URL (no /v1). The `env` of its settings files wins over the process environment, so
the proxy's address also goes in `--settings`, which wins over them (and leaves every file as it is).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from app.wrap.agents.base import Launch, Upstreams, read_text, trimmed

BASE_URL = "ANTHROPIC_BASE_URL"


def settings_files(env: Mapping[str, str], cwd: Path) -> Iterator[Path]:
    """The settings files whose `env` Claude Code applies, the lowest precedence first."""
    home = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else Path(env.get("HOME", "~")) / ".claude"
    yield home / "settings.json"
    yield cwd / ".claude" / "settings.json"
    yield cwd / ".claude" / "settings.local.json"


class ClaudeCode:
    executable = "claude"

    def upstreams(self, env: Mapping[str, str], cwd: Path) -> Upstreams:
        url = env.get(BASE_URL)
        for path in settings_files(env, cwd):
            try:
                settings = json.loads(read_text(path) or "{}")
            except json.JSONDecodeError:
                continue  # Claude Code ignores a file it cannot read, and so does wrap
            value = settings.get("env", {}).get(BASE_URL) if isinstance(settings, dict) else None
            if isinstance(value, str) and value:
                url = value
        return Upstreams(anthropic=trimmed(url))

    def launch(
        self, args: Sequence[str], proxy: str, forwards_to: Upstreams, env: Mapping[str, str], cwd: Path
    ) -> Launch:
        overlay = json.dumps({"env": {BASE_URL: proxy}})
        return Launch(["claude", "--settings", overlay, *args], {**env, BASE_URL: proxy})
