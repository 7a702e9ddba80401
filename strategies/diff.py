"""What a chain did to each message of a request: kept, masked, cut, dropped, folded, minified or rewritten, by which
steps, its size before and after, and the refs its stubs carry; and what the steps added (notes, a left-out marker).

Followed step by step (Chain.run's watch), not guessed from the two ends: a step returns every message it did not
change as the very object it got (Strategy.apply's contract), so a message is known by its identity from one step
to the next. One a step rewrote is found between those by what a rewrite keeps (its role, the call id it answers or
makes, the wire format's own key, the ref of its original in its stub), in conversation order, since no step
reorders. What happened to it is then read from what it became: its stub (strategies.markers.stub_kind), its calls,
and which steps changed it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Literal

from .conversation import arguments_of, is_tool_result, message_text, result_id, role, tool_calls_of
from .markers import stub_kind
from .messages import WIRE_KEY, Message
from .minify import Minify
from .notes_fold import NOTES_HEADER
from .refs import ref_of, stub_refs

# How far past the last message paired a rewritten one is looked for: a step that copied every message it got (a
# plugin's) would otherwise cost a scan of the rest, hashing, for each.
LOOKAHEAD = 64
Action = Literal["kept", "masked", "cut", "dropped", "folded", "minified", "rewritten", "added"]


@dataclass(frozen=True)
class MessageDiff:
    """One message's line of the diff. index: its place in the original messages (None: a step added it); at: in
    the compacted ones (None: it went); by: the steps that changed, removed or added it, in order.
    """

    index: int | None
    at: int | None
    role: str
    action: Action
    by: tuple[str, ...]
    chars_before: int
    chars_after: int
    refs: tuple[str, ...]
    before: Message | None
    after: Message | None


def chars(message: Message) -> int:
    """A message's size as its stubs give sizes: the characters of its text and of its calls' arguments."""
    return len(message_text(message)) + sum(len(a) for a in arguments_of(message))


class Diff:
    """Follows the original messages through a chain: pass `step` as Chain.run's watch, and once more with the
    messages as they go (name None: not a strategy's doing, e.g. the wire format's settle); then `rows()`.
    """

    def __init__(self, original: list[Message]) -> None:
        self.original = original
        self._at: list[int | None] = list(range(len(original)))  # each one's place in the current messages; None: gone
        self._by: list[list[str]] = [[] for _ in original]
        self._gone: dict[int, str] = {}  # original index -> the step it went in
        self._added: dict[int, str] = {}  # place in the current messages -> the step that added it
        self._current = original

    def step(self, name: str | None, before: list[Message], after: list[Message]) -> None:
        """One step: `before` is what the last step returned (the original, first), `after` what this one did."""
        source = align(before, after)
        back = {b: a for a, b in enumerate(source) if b is not None}
        for i, p in enumerate(self._at):
            if p is None:
                continue
            q = back.get(p)
            if q is None and name is not None:
                self._gone[i] = name
            elif q is not None and after[q] is not before[p] and name is not None:
                self._by[i].append(name)
            self._at[i] = q
        added: dict[int, str] = {}
        for q, b in enumerate(source):
            if b is None and name is not None:
                added[q] = name
            elif b is not None and b in self._added:
                added[q] = self._added[b]
        self._added = added
        self._current = after

    def rows(self) -> list[MessageDiff]:
        """Every original message in order, with what the steps added placed where it went."""
        final = self._current
        markers: dict[str, list[Message]] = {}  # step -> the left-out markers it added
        folding: set[str] = set()  # the steps that added notes: what they removed, they folded into them
        for q, name in self._added.items():
            text = message_text(final[q])
            if stub_kind(text) == "left_out":
                markers.setdefault(name, []).append(final[q])
            elif text.startswith(NOTES_HEADER):
                folding.add(name)
        added = deque(sorted(self._added.items()))
        # An added message is listed before the first original, kept or gone, that comes after it: a marker for
        # what went before the messages it stands for.
        following: list[int | None] = [None] * len(self.original)
        upcoming: int | None = None
        for i in range(len(self.original) - 1, -1, -1):
            upcoming = self._at[i] if self._at[i] is not None else upcoming
            following[i] = upcoming
        rows: list[MessageDiff] = []
        for i, message in enumerate(self.original):
            nxt = following[i]
            while added and nxt is not None and added[0][0] < nxt:
                rows.append(self._added_row(*added.popleft()))
            rows.append(self._row(i, message, self._at[i], markers, folding))
        rows.extend(self._added_row(q, name) for q, name in added)
        return rows

    def _row(
        self, i: int, message: Message, q: int | None, markers: dict[str, list[Message]], folding: set[str]
    ) -> MessageDiff:
        size, said = chars(message), str(role(message))
        if q is None:
            step = self._gone.get(i, "")
            refs = _refs(markers.get(step, []))  # a left-out marker's ref resolves to an index of what it left out
            action: Action = "folded" if step in folding else "dropped"
            return MessageDiff(i, None, said, action, (step,) if step else (), size, 0, refs, message, None)
        after = self._current[q]
        if after is message or after == message:
            return MessageDiff(i, q, said, "kept", (), size, size, (), message, after)
        by = tuple(self._by[i])
        action = what_happened(message, after, by)
        return MessageDiff(i, q, said, action, by, size, chars(after), _refs([after]), message, after)

    def _added_row(self, q: int, name: str) -> MessageDiff:
        after = self._current[q]
        return MessageDiff(None, q, str(role(after)), "added", (name,), 0, chars(after), _refs([after]), None, after)


def _refs(messages: list[Message]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(stub_refs(messages)))


def what_happened(before: Message, after: Message, by: tuple[str, ...]) -> Action:
    """What the steps `by` did to a message that is still there but no longer the same."""
    kind = stub_kind(message_text(after))
    if kind == "whole":
        return "masked"
    if kind == "part" or any(stub_kind(a) == "part" for a in arguments_of(after)):
        return "cut"
    # Calls dropped with their results, or arguments stubbed (clear_tool_uses' clear_tool_inputs).
    if len(tool_calls_of(after)) < len(tool_calls_of(before)) or arguments_of(after) != arguments_of(before):
        return "cut"
    return "minified" if by and all(name == Minify.name for name in by) else "rewritten"


def align(before: list[Message], after: list[Message]) -> list[int | None]:
    """For each message a step returned, the one it got that it came from (None: the step added it)."""
    by_identity = {id(m): i for i, m in enumerate(before)}
    source: list[int | None] = [None] * len(after)
    last = -1
    for j, message in enumerate(after):
        i = by_identity.get(id(message))
        if i is not None and i > last:
            source[j], last = i, i
    j = 0
    while j < len(after):
        if source[j] is not None:
            j += 1
            continue
        start = j
        while j < len(after) and source[j] is None:
            j += 1
        below = source[start - 1] if start else None
        lo = below + 1 if below is not None else 0
        above = source[j] if j < len(after) else None
        _pair_rewritten(before, after, source, range(start, j), range(lo, len(before) if above is None else above))
    return source


def _pair_rewritten(
    before: list[Message], after: list[Message], source: list[int | None], rewritten: range, got: range
) -> None:
    """Between two messages a step kept as they were: each one it returned paired with one it got there, in order,
    by what a rewrite keeps; else with the next one it got of the same role, unless it is a marker a step adds.
    """
    cursor = got.start
    for j in rewritten:
        message = after[j]
        ahead = range(cursor, min(got.stop, cursor + LOOKAHEAD))
        found = next((i for i in ahead if _same_message(before[i], message)), None)
        if found is None and cursor < got.stop and _may_be_rewritten(before[cursor], message):
            found = cursor
        if found is not None:
            source[j], cursor = found, found + 1


def _same_message(original: Message, rewritten: Message) -> bool:
    if role(original) != role(rewritten):
        return False
    wire = original.get(WIRE_KEY)
    if wire is not None and rewritten.get(WIRE_KEY) is wire:
        return True  # a copy keeps the wire format's own key, which is one object per message parsed
    if is_tool_result(original):
        return result_id(original) is not None and result_id(original) == result_id(rewritten)
    made = {c.get("id") for c in tool_calls_of(original)}
    kept = {c.get("id") for c in tool_calls_of(rewritten)}
    if kept and kept <= made:
        return True
    text = message_text(original)
    if message_text(rewritten) == text:
        return True
    refs = list(stub_refs([rewritten]))
    return bool(refs) and ref_of(text) in refs


def _may_be_rewritten(original: Message, rewritten: Message) -> bool:
    text = message_text(rewritten)
    added = stub_kind(text) == "left_out" or text.startswith(NOTES_HEADER)
    with_ids = bool(tool_calls_of(original)) or result_id(original) is not None  # those pair by their ids alone
    return not added and not with_ids and role(original) == role(rewritten)
