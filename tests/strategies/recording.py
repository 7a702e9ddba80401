"""Strategies return what they found out with their messages (strategies.base.Applied); most tests read the
messages and look at the details apart, as ctx.details, through this small harness.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from strategies import Context, Message, Strategy


@dataclass(frozen=True)
class RecordingContext(Context):
    """A Context that keeps what the last strategy run through `apply` found out."""

    details: dict[str, Any] = field(default_factory=dict)


def apply(strategy: Strategy[Any], messages: list[Message], ctx: Context) -> list[Message]:
    """strategy.apply's messages; its details land in ctx.details when ctx is a RecordingContext."""
    applied = strategy.apply(messages, ctx)
    if isinstance(ctx, RecordingContext):
        ctx.details.clear()
        ctx.details.update(applied.details)
    return applied.messages
