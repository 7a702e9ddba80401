"""Any command (`wrap -- CMD ARGS`): the two variables most clients read, OPENAI_BASE_URL (with /v1) and
ANTHROPIC_BASE_URL (without).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from app.wrap.agents.base import Launch, Upstreams, trimmed

OPENAI = "OPENAI_BASE_URL"
ANTHROPIC = "ANTHROPIC_BASE_URL"


class Command:
    executable = None

    def upstreams(self, env: Mapping[str, str], cwd: Path) -> Upstreams:
        return Upstreams(openai=trimmed(env.get(OPENAI)), anthropic=trimmed(env.get(ANTHROPIC)))

    def launch(
        self, args: Sequence[str], proxy: str, forwards_to: Upstreams, env: Mapping[str, str], cwd: Path
    ) -> Launch:
        return Launch(list(args), {**env, OPENAI: f"{proxy}/v1", ANTHROPIC: proxy})
