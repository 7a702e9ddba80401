"""Codex CLI: it ignores OPENAI_BASE_URL (0.171); its built-in `openai` provider takes `openai_base_url`, any other
provider its `model_providers.NAME.base_url`, both from config.toml. wrap overrides the one in use with `-c` on the
command line, so config.toml (in CODEX_HOME, else ~/.codex) is read and never written.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.wrap.agents.base import Launch, Upstreams, WrapError, read_text, trimmed

BUILT_IN = "openai"


def config(env: Mapping[str, str]) -> dict[str, Any]:
    home = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else Path(env.get("HOME", "~")) / ".codex"
    path = home / "config.toml"
    try:
        return tomllib.loads(read_text(path) or "")
    except tomllib.TOMLDecodeError as exc:
        raise WrapError(f"Codex's {path} is not valid TOML: {exc}") from None


def provider(settings: Mapping[str, Any]) -> str:
    """The model provider Codex uses: its profile's, if config.toml picks a profile, else its own."""
    profile = settings.get("profiles", {}).get(settings.get("profile"), {})
    name = profile.get("model_provider") or settings.get("model_provider") or BUILT_IN
    return str(name)


def _key(settings: Mapping[str, Any]) -> tuple[str, str | None]:
    """The config key holding the provider's base URL, and its value."""
    name = provider(settings)
    if name == BUILT_IN:
        return "openai_base_url", settings.get("openai_base_url")
    entry = settings.get("model_providers", {}).get(name)
    if not isinstance(entry, dict) or not entry.get("base_url"):
        # Its other built-ins (oss, ...) speak to a local server of their own that wrap has no key for.
        raise WrapError(f"Codex's model provider {name!r} has no base_url in config.toml for wrap to point elsewhere")
    return f"model_providers.{name}.base_url", entry["base_url"]


class Codex:
    executable = "codex"

    def upstreams(self, env: Mapping[str, str], cwd: Path) -> Upstreams:
        return Upstreams(openai=trimmed(_key(config(env))[1]))

    def launch(
        self, args: Sequence[str], proxy: str, forwards_to: Upstreams, env: Mapping[str, str], cwd: Path
    ) -> Launch:
        key, _ = _key(config(env))
        # The value is read as TOML: a JSON string of a URL is a TOML basic string.
        return Launch(["codex", "-c", f"{key}={json.dumps(f'{proxy}/v1')}", *args], dict(env))
