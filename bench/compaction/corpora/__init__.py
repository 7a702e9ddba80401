"""The conversations the compaction benchmark replays, and the facts planted in them.

A corpus is a list of whole conversations as a client would hold them at their end. The benchmark replays
every request the client sent along the way: each prefix that ends where the model answered next.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from strategies import Message
from strategies.conversation import text_of


@dataclass(frozen=True)
class Probe:
    """A planted fact that the model needs to answer one request.

    `answer_at` is the index of the assistant message that needs it, so the request is
    messages[:answer_at]. `value` is the fact as it stands then; `stale` holds the values a later decision
    replaced, to tell a model that sees only an outdated value from one that sees nothing.
    """

    answer_at: int
    kind: str  # code, amount, name or time
    label: str
    value: str
    stale: tuple[str, ...] = ()


@dataclass(frozen=True)
class Conversation:
    id: str
    messages: list[Message]
    tools: list[dict[str, Any]] | None = None
    probes: tuple[Probe, ...] = ()


@dataclass(frozen=True)
class Corpus:
    key: str  # short name used on the command line and in charts
    title: str
    description: str
    conversations: list[Conversation] = field(default_factory=list)
    # Why the corpus could not be built (a missing optional package): printed instead of its table.
    skipped: str | None = None
    has_probes: bool = False


def message_text(message: Message) -> str:
    """What the model reads of a message: its text and the arguments of its calls. Arguments are JSON, where
    non-ASCII text is escaped (Tom\\u00e1s): their decoded strings are added so a search finds the value.
    """
    parts = [text_of(message.get("content"))]
    for call in message.get("tool_calls") or []:
        arguments = call.get("function", {}).get("arguments") if isinstance(call, dict) else None
        if isinstance(arguments, str):
            parts.append(arguments)
            if "\\" in arguments:
                parts.extend(json_strings(arguments))
    return "\n".join(parts)


def json_strings(arguments: str) -> list[str]:
    """Every string inside a JSON document (keys excluded); none if it is not JSON."""
    try:
        data = json.loads(arguments)
    except ValueError:
        return []
    found: list[str] = []
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list):
            stack.extend(reversed(value))
        elif isinstance(value, dict):
            stack.extend(reversed(list(value.values())))
    return found
