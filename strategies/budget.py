"""The token budget of a request: what the context window leaves for the prompt."""

from __future__ import annotations

from .base import Context

# Held back from the context window: our counts follow OpenAI's cookbook estimate, providers add tokens of
# their own (and other tokenizers count differently), so a prompt sized to the last token may still be refused.
SAFETY_MARGIN_PERCENT = 2


def safety_margin(ctx: Context) -> int:
    return ctx.limits.context_window * SAFETY_MARGIN_PERCENT // 100


def default_total(ctx: Context, reserve: int | None = None) -> int:
    """Prompt tokens a request may have: the context window minus the output reserve and the safety margin."""
    if reserve is None:
        reserve = ctx.output_reserve()
    return max(0, ctx.limits.context_window - reserve - safety_margin(ctx))
