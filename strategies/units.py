"""Units: the pieces of a conversation strategies keep or drop whole, so nothing is cut apart.

A unit is a user message with the assistant text reply that directly follows it; an assistant message
with tool calls together with all their results; or any other single message.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Message
from .tool_pairs import find_pairs


@dataclass(frozen=True)
class Unit:
    indices: tuple[int, ...]  # positions in the original message list, ascending

    @property
    def start(self) -> int:
        return self.indices[0]


def split_units(messages: list[Message]) -> list[Unit]:
    """Units in conversation order. A tool result is placed with the assistant message whose call it
    answers (even when other messages sit between them); unanswered results stand alone.
    """
    owner: dict[int, int] = {p.result_index: p.call_index for p in find_pairs(messages)}
    results_of: dict[int, list[int]] = {}
    for result, call in owner.items():
        results_of.setdefault(call, []).append(result)
    units: list[Unit] = []
    index = 0
    while index < len(messages):
        if index in owner:  # already placed with its call
            index += 1
            continue
        message = messages[index]
        if index in results_of:
            units.append(Unit((index, *sorted(results_of[index]))))
        elif (
            message.get("role") == "user"
            and index + 1 < len(messages)
            and _is_text_reply(messages[index + 1])
            and index + 1 not in results_of
        ):
            units.append(Unit((index, index + 1)))
            index += 1
        else:
            units.append(Unit((index,)))
        index += 1
    return units


def _is_text_reply(message: Message) -> bool:
    return message.get("role") == "assistant" and "tool_calls" not in message and "function_call" not in message


def pinned_units(messages: list[Message], units: list[Unit]) -> set[int]:
    """Positions (in `units`) that compaction must keep: system and developer messages, the unit holding
    the first user message, and the unit holding the last user message.
    """
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    wanted = {i for i, m in enumerate(messages) if m.get("role") in ("system", "developer")}
    wanted.update(users[:1] + users[-1:])
    return {position for position, unit in enumerate(units) if wanted.intersection(unit.indices)}


def gather(messages: list[Message], units: list[Unit], keep: set[int]) -> list[Message]:
    """The messages of the kept units, in their original order."""
    indices = sorted(i for position in keep for i in units[position].indices)
    return [messages[i] for i in indices]
