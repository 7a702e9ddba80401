"""The identity strategy: `X-Compaction-Strategies: none` forwards the messages as they came."""

from __future__ import annotations

from .base import Applied, Params, Strategy
from .context import Context
from .messages import Message


class NoneParams(Params):
    pass


class Noop(Strategy[NoneParams]):
    name = "none"
    params_model = NoneParams
    summary = "Forward the messages unchanged."

    def apply(self, messages: list[Message], ctx: Context) -> Applied:
        return Applied(messages)
