"""The strategies' tests' small harness: a Context that keeps what the last strategy found out (strategies
return it with their messages, strategies.base.Applied), and the design's invariants checked in one call.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from strategies import Context, Message, Strategy
from strategies.invariants import compaction_problems, pairing_problems


@dataclass(frozen=True)
class RecordingContext(Context):
    """A Context that keeps what the last strategy run through `apply` found out."""

    details: dict[str, Any] = field(default_factory=dict)


def ref(text: str) -> str:
    """A stub's ref, written out independently of strategies.refs: 10 hex digits of the text's SHA-256."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def expand_hint(text: str) -> str:
    """How every stub says its content comes back."""
    return f'call compaction_expand with ref="{ref(text)}"'


def apply(strategy: Strategy[Any], messages: list[Message], ctx: Context) -> list[Message]:
    """strategy.apply's messages; its details land in ctx.details when ctx is a RecordingContext."""
    applied = strategy.apply(messages, ctx)
    if isinstance(ctx, RecordingContext):
        ctx.details.clear()
        ctx.details.update(applied.details)
    return applied.messages


def keeps_the_invariants(run: Callable[[list[Message]], list[Message]], messages: list[Message]) -> list[Message]:
    """run(messages), asserting design.md's invariants: the input untouched, valid pairs stay valid, pinned
    messages forwarded byte-identical and in order, the same output again for the same input. Returns the output.
    """
    snapshot = copy.deepcopy(messages)
    out = run(messages)
    assert json.dumps(messages) == json.dumps(snapshot)  # 1. the input is untouched
    assert compaction_problems(messages, out) == []  # 2. and 3.
    assert pairing_problems(out) == []
    assert json.dumps(run(snapshot)) == json.dumps(out)  # 4. deterministic
    return out
