"""Planted facts: distinctive values (codes, amounts, names, times) and the decisions that replace them.

Values are drawn so filler text can never contain one by chance: codes have a shape no filler uses, amounts
are written with a currency sign and cents (filler only has integer cents), names come from a list filler
never uses, and times end in minutes filler never uses (filler times are on the quarter hour).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from itertools import chain

from strategies import Message

from . import Probe, message_text

KINDS = ("code", "amount", "name", "time")
_FIRST = ("Priya", "Tomás", "Ingrid", "Kwame", "Mei", "Rafael", "Aylin", "Dmitri", "Noor", "Callum", "Yuki", "Zanele")
_LAST = ("Raman", "Okafor", "Lindqvist", "Mensah", "Takahashi", "Duarte", "Yilmaz", "Volkov", "Haddad", "Fraser")
_PREFIXES = ("PAY", "OPS", "REL", "SEC", "INV", "FRY", "HTL", "TRN")
_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"
FACT_MINUTES = (5, 10, 20, 25, 35, 40, 50, 55)


def draw_value(rng: random.Random, kind: str, used: set[str], currency: str = "$") -> str:
    while True:
        if kind == "code":
            value = f"{rng.choice(_PREFIXES)}-{rng.randrange(1000, 10000)}-{rng.choice(_LETTERS)}{rng.choice(_LETTERS)}"
        elif kind == "amount":
            value = f"{currency}{rng.randrange(1000, 10000):,}.{rng.choice((15, 35, 45, 65, 85, 95))}"
        elif kind == "name":
            value = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
        else:
            value = f"{rng.randrange(6, 22):02d}:{rng.choice(FACT_MINUTES):02d}"
        if value not in used:
            used.add(value)
            return value


def free_slot(rng: random.Random, taken: set[int], low: int, high: int) -> int | None:
    """A random position in [low, high] that no other event holds (the nearest free one), now taken; None if full."""
    pick = rng.randint(low, max(low, high))
    for candidate in chain(range(pick, high + 1), range(pick - 1, low - 1, -1)):
        if candidate not in taken:
            taken.add(candidate)
            return candidate
    return None


@dataclass
class Fact:
    """One fact of a conversation: its successive values, where each was planted and where each is needed."""

    kind: str
    label: str
    values: list[str]
    planted_at: list[int] = field(default_factory=list)  # message index of each value's first mention
    needs: list[tuple[int, int]] = field(default_factory=list)  # (answer_at, version) pairs

    def probes(self) -> list[Probe]:
        return [
            Probe(at, self.kind, self.label, self.values[version], tuple(self.values[:version]))
            for at, version in self.needs
        ]


def check_planted(messages: list[Message], facts: list[Fact]) -> None:
    """Each value must appear only where it was planted (or re-stated) before the request that needs it,
    never by accident in filler: otherwise survival would be measured on the wrong message.
    """
    texts = [message_text(m) for m in messages]
    for fact in facts:
        for at, version in fact.needs:
            value = fact.values[version]
            first = min(i for i, text in enumerate(texts) if value in text)
            asked_with_it = messages[at - 1].get("role") == "user" and value in texts[at - 1]
            if first != fact.planted_at[version] or asked_with_it:
                raise ValueError(f"fact {fact.label!r} value {value!r} leaks outside its planting (message {first})")
