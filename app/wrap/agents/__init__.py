"""The agents wrap knows by name, and `wrap -- CMD` for any other command."""

from __future__ import annotations

from app.wrap.agents.base import Agent, Launch, Upstreams, WrapError
from app.wrap.agents.claude import ClaudeCode
from app.wrap.agents.codex import Codex
from app.wrap.agents.command import Command
from app.wrap.agents.opencode import OpenCode

AGENTS: dict[str, type[Agent]] = {"claude": ClaudeCode, "codex": Codex, "opencode": OpenCode}

__all__ = ["AGENTS", "Agent", "Command", "Launch", "Upstreams", "WrapError"]
