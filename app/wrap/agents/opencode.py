"""opencode: each provider's `options.baseURL` in its JSON(C) config. wrap sets it in OPENCODE_CONFIG_CONTENT, the
inline config opencode merges over every config file (project ones included) and never writes, for each provider
whose requests the proxy forwards where they were going: the built-in `openai` and `anthropic` ones and any
`@ai-sdk/openai-compatible`, `@ai-sdk/openai` or `@ai-sdk/anthropic` provider of the user's. A provider going
elsewhere is left as it is, and wrap says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from app.settings import Api
from app.wrap.agents.base import Launch, Upstreams, WrapError, read_text, trimmed

CONTENT = "OPENCODE_CONFIG_CONTENT"
PACKAGES: dict[str, Api] = {
    "@ai-sdk/openai-compatible": "openai",
    "@ai-sdk/openai": "openai",
    "@ai-sdk/anthropic": "anthropic",
}
# The built-in providers and where they go unless configured otherwise (both with /v1, as their SDKs write it).
BUILT_IN: dict[str, tuple[Api, str]] = {
    "openai": ("openai", "https://api.openai.com/v1"),
    "anthropic": ("anthropic", "https://api.anthropic.com/v1"),
}
# A string (kept), or a comment or a comma before a closing bracket (dropped): JSONC to JSON.
_JSONC = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.S)
_TRAILING_COMMA = re.compile(r'"(?:\\.|[^"\\])*"|,(?=\s*[}\]])')


def loads_jsonc(text: str) -> Any:
    def keep_strings(match: re.Match[str]) -> str:
        return match.group(0) if match.group(0).startswith('"') else ""

    return json.loads(_TRAILING_COMMA.sub(keep_strings, _JSONC.sub(keep_strings, text)))


def merged(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`over` merged into a copy of `base` as opencode merges configs: objects key by key, anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def config_files(env: Mapping[str, str], cwd: Path) -> Iterator[Path]:
    """Where opencode reads its config, the lowest precedence first: the global files, OPENCODE_CONFIG, then
    opencode.json(c) from the repository's root down to the working directory.
    """
    config_home = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path(env.get("HOME", "~")) / ".config"
    for name in ("config.json", "opencode.json", "opencode.jsonc"):
        yield config_home / "opencode" / name
    if env.get("OPENCODE_CONFIG"):
        yield Path(env["OPENCODE_CONFIG"])
    root = next((d for d in (cwd, *cwd.parents) if (d / ".git").exists()), cwd)
    for directory in reversed([d for d in (cwd, *cwd.parents) if d.is_relative_to(root)]):
        yield directory / "opencode.jsonc"
        yield directory / "opencode.json"


def user_config(env: Mapping[str, str], cwd: Path) -> dict[str, Any]:
    config: dict[str, Any] = {}
    sources = [(str(p), read_text(p)) for p in config_files(env, cwd)] + [(CONTENT, env.get(CONTENT))]
    for where, text in sources:
        if not text:
            continue
        try:
            layer = loads_jsonc(text)
        except json.JSONDecodeError as exc:
            raise WrapError(f"opencode's config {where} is not valid JSON(C): {exc}") from None
        if isinstance(layer, dict):
            config = merged(config, layer)
    return config


def providers(config: Mapping[str, Any]) -> Iterator[tuple[str, Api, str]]:
    """Each provider the proxy can stand in front of: its id, its API and its base URL as opencode would use it."""
    entries: dict[str, Any] = {name: {} for name in BUILT_IN} | dict(config.get("provider") or {})
    for name, entry in entries.items():
        entry = entry if isinstance(entry, dict) else {}
        built_in = BUILT_IN.get(name)
        api = PACKAGES.get(str(entry.get("npm"))) or (built_in[0] if built_in else None)
        base = trimmed((entry.get("options") or {}).get("baseURL")) or (built_in[1] if built_in else None)
        if api is not None and base is not None:
            yield name, api, base


def _without_v1(url: str) -> str:
    return url.removesuffix("/v1")


class OpenCode:
    executable = "opencode"

    def upstreams(self, env: Mapping[str, str], cwd: Path) -> Upstreams:
        """The base URL of the provider of the configured model, where it is one of the user's own."""
        config = user_config(env, cwd)
        name = str(config.get("model") or "").partition("/")[0]
        for provider, api, base in providers(config):
            if provider == name and base != BUILT_IN.get(provider, (api, ""))[1]:
                return Upstreams(openai=base) if api == "openai" else Upstreams(anthropic=_without_v1(base))
        return Upstreams()

    def launch(
        self, args: Sequence[str], proxy: str, forwards_to: Upstreams, env: Mapping[str, str], cwd: Path
    ) -> Launch:
        config = user_config(env, cwd)
        targets = {"openai": forwards_to.openai, "anthropic": f"{forwards_to.anthropic}/v1"}
        redirected: dict[str, Any] = {}
        notes = []
        for name, api, base in providers(config):
            if base == targets[api]:
                redirected[name] = {"options": {"baseURL": f"{proxy}/v1"}}
            elif name in (config.get("provider") or {}):
                notes.append(f"opencode's provider {name!r} goes elsewhere than the proxy forwards: not through it")
        inline = merged(loads_jsonc(env[CONTENT]) if env.get(CONTENT) else {}, {"provider": redirected})
        return Launch(["opencode", *args], {**env, CONTENT: json.dumps(inline)}, notes)
