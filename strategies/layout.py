"""A conversation in units, the pieces strategies keep or drop whole so nothing is cut apart, priced in tokens;
built once per request and readable at any of its prefixes.

A unit is a user message with the assistant text reply that directly follows it; an assistant message with tool
calls together with all their results; or any other single message.

Budget strategies (fit, middle_out, window, notes) keep or drop whole units. With epochs (strategies.epochs)
they decide at many earlier request ends of one request; rebuilding the units and prices of each prefix
would cost the whole prefix every time, so a request of n messages with many jumps cost O(n^2). Here the
units, prices and pinned messages are computed once; a `Prefix` answers what a cut of the first `end`
messages keeps and costs in time proportional to what it keeps.

Units of a prefix are the units of the whole request truncated to the prefix: tool pairs are found by a
left-to-right scan, so a prefix pairs exactly as the whole does, and a user message whose text reply lies
past the end of the prefix stands alone.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from .context import Context
from .conversation import find_pairs, is_pinned_role, is_text_reply, is_user
from .messages import Message


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
        elif is_user(message) and index + 1 < len(messages) and is_text_reply(messages[index + 1]):
            units.append(Unit((index, index + 1)))
            index += 1
        else:
            units.append(Unit((index,)))
        index += 1
    return units


def pinned_units(messages: list[Message], units: list[Unit]) -> set[int]:
    """Positions (in `units`) that compaction must keep: system and developer messages, the unit holding
    the first user message, and the unit holding the last user message.
    """
    users = [i for i, m in enumerate(messages) if is_user(m)]
    wanted = {i for i, m in enumerate(messages) if is_pinned_role(m)}
    wanted.update(users[:1] + users[-1:])
    return {position for position, unit in enumerate(units) if wanted.intersection(unit.indices)}


def gather(messages: list[Message], units: list[Unit], keep: set[int]) -> list[Message]:
    """The messages of the kept units, in their original order."""
    indices = sorted(i for position in keep for i in units[position].indices)
    return [messages[i] for i in indices]


@dataclass(frozen=True)
class Cut:
    """What a cut keeps of a prefix: every unit except the removable ones in [lo, hi) (positions in the
    layout's units), with the prompt tokens and message count of what is kept.
    """

    lo: int
    hi: int
    tokens: int
    count: int
    kept_units: int = 0  # removable units kept
    overflow: bool = False  # the pinned units alone are over `total`
    total: int = 0  # the prompt tokens the cut had to keep the prefix within


class Layout:
    """The units of a request with their prompt tokens. The prompt tokens of any set of whole units are
    `overhead` plus their units' tokens, exactly what ctx.count_request gives for those messages.
    """

    def __init__(self, messages: list[Message], units: list[Unit], message_tokens: tuple[int, ...], overhead: int):
        self.messages = messages
        self.units = units
        self.message_tokens = message_tokens
        self.overhead = overhead
        self.starts = [unit.start for unit in units]
        self.users = [i for i, m in enumerate(messages) if is_user(m)]
        self._unit_of = [0] * len(messages)
        # Per unit, the tokens of its first k messages (k = 0 .. len), so any truncation is priced by a bisect.
        self._cumulative: list[list[int]] = []
        for position, unit in enumerate(units):
            running = [0]
            for index in unit.indices:
                self._unit_of[index] = position
                running.append(running[-1] + message_tokens[index])
            self._cumulative.append(running)
        # System and developer messages are units of their own: their tokens and count before any index.
        self._pinned_role_tokens = [0]
        self._pinned_role_count = [0]
        for index, message in enumerate(messages):
            pinned = is_pinned_role(message)
            self._pinned_role_tokens.append(self._pinned_role_tokens[-1] + (message_tokens[index] if pinned else 0))
            self._pinned_role_count.append(self._pinned_role_count[-1] + pinned)
        self.first_user_unit = self._unit_of[self.users[0]] if self.users else None
        # Units pinned in every prefix that holds them: system/developer messages and the first user's unit.
        fixed = [any(is_pinned_role(messages[i]) for i in unit.indices) for unit in units]
        if self.first_user_unit is not None:
            fixed[self.first_user_unit] = True
        self._fixed = fixed
        self._fixed_positions = [p for p, is_fixed in enumerate(fixed) if is_fixed]
        # The nearest unit at or before / at or after each position that is not always pinned, so runs of
        # system messages are skipped in one step.
        self._free_before: list[int] = []
        last = -1
        for position, is_fixed in enumerate(fixed):
            last = last if is_fixed else position
            self._free_before.append(last)
        self._free_after = [len(units)] * len(units)
        following = len(units)
        for position in range(len(units) - 1, -1, -1):
            following = following if fixed[position] else position
            self._free_after[position] = following

    @classmethod
    def of(cls, messages: list[Message], ctx: Context) -> Layout:
        tokens = tuple(ctx.count_message(m) for m in messages)
        return cls(messages, split_units(messages), tokens, ctx.count_request([]))

    def prefix(self, end: int) -> Prefix:
        return Prefix(self, end)

    # The whole request, as window and notes read it.
    @cached_property
    def tokens(self) -> tuple[int, ...]:
        """Per unit."""
        return tuple(running[-1] for running in self._cumulative)

    @cached_property
    def pinned(self) -> frozenset[int]:
        return frozenset(pinned_units(self.messages, self.units))

    @property
    def removable(self) -> list[int]:
        """Positions of the units compaction may drop, oldest first."""
        return [p for p in range(len(self.units)) if p not in self.pinned]

    def cost(self, keep: Iterable[int]) -> int:
        """Prompt tokens of a request holding exactly these units."""
        return self.overhead + sum(self.tokens[p] for p in keep)

    def unit_of(self) -> list[int]:
        """Message index -> position of its unit."""
        return self._unit_of

    def gather(self, keep: Iterable[int]) -> list[Message]:
        """The messages of these units, in their original order."""
        return gather(self.messages, self.units, set(keep))


class Prefix:
    """The first `end` messages of a layout's request, as if they were the whole request."""

    def __init__(self, layout: Layout, end: int) -> None:
        self.layout = layout
        self.end = end
        self.last = bisect_left(layout.starts, end) - 1  # the newest unit that starts inside the prefix
        users = layout.users
        last_user = users[bisect_left(users, end) - 1] if users and users[0] < end else None
        self.first = layout.first_user_unit if last_user is not None else None
        self.question = layout._unit_of[last_user] if last_user is not None else None

    def unit_tokens(self, position: int) -> int:
        unit = self.layout.units[position]
        return self.layout._cumulative[position][bisect_left(unit.indices, self.end)]

    def unit_count(self, position: int) -> int:
        return bisect_left(self.layout.units[position].indices, self.end)

    def _pinned_units(self) -> list[int]:
        """The pinned units that are not system/developer messages: the first and the last user's."""
        return [p for p in dict.fromkeys((self.first, self.question)) if p is not None]

    @property
    def pinned_tokens(self) -> int:
        """Prompt tokens of a request holding only the pinned units (overhead included)."""
        layout = self.layout
        own = sum(self.unit_tokens(p) for p in self._pinned_units())
        return layout.overhead + layout._pinned_role_tokens[self.end] + own

    @property
    def pinned_count(self) -> int:
        return self.layout._pinned_role_count[self.end] + sum(self.unit_count(p) for p in self._pinned_units())

    def pinned_unit_count(self) -> int:
        return self.layout._pinned_role_count[self.end] + len(self._pinned_units())

    def removable_count(self) -> int:
        """Units compaction may drop: those that start inside the prefix, less the pinned ones."""
        return self.last + 1 - self.pinned_unit_count()

    def newest_removable(self) -> int:
        """The newest unit compaction may drop, or -1."""
        return self.older(self.last + 1)

    def oldest_removable(self) -> int:
        """The oldest unit compaction may drop, or a position past self.last when there is none."""
        return self.newer(-1)

    def older(self, position: int) -> int:
        """The newest removable unit before `position`, or -1."""
        free_before = self.layout._free_before
        found = free_before[position - 1] if position > 0 else -1
        if found != -1 and found == self.question:
            found = free_before[found - 1] if found > 0 else -1
        return found

    def newer(self, position: int) -> int:
        """The oldest removable unit after `position` inside the prefix, or a position past self.last."""
        free_after = self.layout._free_after
        found = free_after[position + 1] if position + 1 < len(free_after) else len(free_after)
        if found == self.question:
            found = free_after[found + 1] if found + 1 < len(free_after) else len(free_after)
        return found if found <= self.last else self.last + 1

    def last_index(self, position: int) -> int:
        """The last message index of a unit inside the prefix."""
        unit = self.layout.units[position]
        return unit.indices[self.unit_count(position) - 1]

    def is_pinned(self, position: int) -> bool:
        return self.layout._fixed[position] or position == self.question

    def kept(self, lo: int, hi: int) -> Cut:
        """The cut that drops the removable units in [lo, hi), priced."""
        tokens, count, units = self.pinned_tokens, self.pinned_count, 0
        for position in self._kept_removable(lo, hi):
            tokens += self.unit_tokens(position)
            count += self.unit_count(position)
            units += 1
        return Cut(lo, hi, tokens, count, units)

    def _kept_removable(self, lo: int, hi: int) -> Iterable[int]:
        position = self.newer(-1)
        while position <= self.last and position < lo:
            yield position
            position = self.newer(position)
        position = self.newer(max(hi, 0) - 1)
        while position <= self.last:
            yield position
            position = self.newer(position)

    def gather(self, lo: int = 0, hi: int = 0) -> list[Message]:
        """The prefix's messages without the removable units in [lo, hi), in their original order."""
        layout, end = self.layout, self.end
        if lo >= hi or self.newer(lo - 1) >= min(hi, self.last + 1):
            return layout.messages[:end]
        units = [*self._kept_removable(lo, hi), *self._pinned_units()]
        fixed = layout._fixed_positions
        units += fixed[: bisect_left(fixed, self.last + 1)]
        indices = sorted({i for p in units for i in layout.units[p].indices if i < end})
        return [layout.messages[i] for i in indices]


def fit_cut(prefix: Prefix, total: int, floor: int = 0) -> Cut:
    """Pinned units always; then the removable units newest first while the request stays within `total`,
    stopping at the first that does not fit, so what goes is one block of the oldest. Units before `floor`
    were cut already and stay cut. Costs time in proportion to what is kept.
    """
    tokens, count = prefix.pinned_tokens, prefix.pinned_count
    hi = prefix.last + 1
    if tokens > total:
        return Cut(0, hi, tokens, count, overflow=True, total=total)
    kept = 0
    position = prefix.newest_removable()
    while position >= floor and position >= 0:
        unit_tokens = prefix.unit_tokens(position)
        if tokens + unit_tokens > total:
            break
        tokens += unit_tokens
        count += prefix.unit_count(position)
        kept += 1
        hi = position
        position = prefix.older(position)
    if position < floor:  # everything from the floor on fits: the cut stays where it was
        hi = floor
    return Cut(0, hi, tokens, count, kept, total=total)
