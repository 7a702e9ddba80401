"""What wrap needs of each agent: where it sends its requests today (read from its own configuration, never
written), and how to start it pointed at the proxy instead (its environment, its flags, an overlay of its config).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class WrapError(Exception):
    """Something wrap cannot do, said to the user as it is: no traceback."""


@dataclass(frozen=True)
class Upstreams:
    """Base URLs as the proxy's settings write them: `openai` as upstream_base_url (with /v1), `anthropic` as
    anthropic_base_url (without). None: the agent goes to the API's own, or wrap could not tell.
    """

    openai: str | None = None
    anthropic: str | None = None


@dataclass(frozen=True)
class Launch:
    """The agent's command line and its whole environment, and what the user should know about them."""

    argv: list[str]
    env: dict[str, str]
    notes: list[str] = field(default_factory=list)


class Agent(Protocol):
    @property
    def executable(self) -> str | None:
        """The program, looked up on PATH; None: the first of the arguments (`wrap -- CMD`)."""
        ...

    def upstreams(self, env: Mapping[str, str], cwd: Path) -> Upstreams:
        """Where the agent's requests go without the proxy, as its configuration and `env` say."""
        ...

    def launch(
        self, args: Sequence[str], proxy: str, forwards_to: Upstreams, env: Mapping[str, str], cwd: Path
    ) -> Launch:
        """The agent run with `args`, its requests sent to `proxy` (http://127.0.0.1:PORT, no /v1), which forwards to
        `forwards_to` (both set).
        """
        ...


def trimmed(url: str | None) -> str | None:
    """A base URL without its trailing slashes; None for an empty one."""
    return url.rstrip("/") or None if url else None


def read_text(path: Path) -> str | None:
    """The file's text, or None if there is none to read (a missing or unreadable file is no configuration)."""
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None
