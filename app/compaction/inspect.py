"""The inspect ring: what compaction did to each message of the most recent forwarded requests (GET /inspect,
`compaction-proxy inspect`).

Off unless inspect_requests is set, because it holds content. Even then an entry holds no body: per message its
role, what happened to it (strategies.diff), its size before and after, its refs, and a preview of its text before
and after of at most PREVIEW_CHARS each, all within inspect_entry_chars; rows past that are counted by what happened
to them, not listed. One ring per process (create_app): under --workers N each worker shows what it forwarded.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from strategies.conversation import CallIndex, message_text, result_id, tool_calls_of
from strategies.diff import MessageDiff
from strategies.messages import Message

PREVIEW_CHARS = 160
# What a row is charged besides its previews: about its fields' size as JSON, so many small rows are bounded too.
ROW_CHARS = 120


def preview(message: Message) -> str:
    """The start of what the model reads in a message: its text, then each call as name(arguments)."""
    calls = CallIndex()
    shown = [message_text(message)]
    for call in tool_calls_of(message):
        call_id = call.get("id") if isinstance(call.get("id"), str) else None
        shown.append(f"{calls.name(message, call_id) or 'tool'}({calls.arguments(message, call_id) or ''})")
    text = " ".join(part for part in shown if part)
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


@dataclass(frozen=True)
class Inspection:
    """One compaction's diff, bounded; made where the compaction ran (its lane), recorded once forwarded."""

    messages: list[dict[str, Any]]
    unlisted: dict[str, int]  # rows past inspect_entry_chars, by what happened to them

    @classmethod
    def of(cls, rows: Sequence[MessageDiff], limit: int) -> Inspection:
        listed: list[dict[str, Any]] = []
        unlisted: Counter[str] = Counter()
        spent = 0
        for row in rows:
            if spent + ROW_CHARS > limit:
                unlisted[row.action] += 1
                continue
            spent += ROW_CHARS
            entry = _row(row)
            before = preview(row.before) if row.before is not None else None
            after = preview(row.after) if row.after is not None and row.action != "kept" else None
            # The previews while they fit: a row without them still says what happened.
            size = len(before or "") + len(after or "")
            if spent + size <= limit:
                spent += size
                entry.update(before=before, after=after)
            listed.append(entry)
        return cls(listed, dict(unlisted))


def call_ids(message: Message) -> list[str]:
    """The call a tool result answers, or the calls a message makes: what names a tool interaction in every format."""
    answered = result_id(message)
    if answered is not None:
        return [answered]
    return [c["id"] for c in tool_calls_of(message) if isinstance(c.get("id"), str)]


def _row(row: MessageDiff) -> dict[str, Any]:
    message = row.before if row.before is not None else row.after
    return {
        "index": row.index,
        "at": row.at,
        "role": row.role,
        "call_ids": call_ids(message) if message is not None else [],
        "action": row.action,
        "by": list(row.by),
        "chars_before": row.chars_before,
        "chars_after": row.chars_after,
        "refs": list(row.refs),
    }


class InspectRing:
    """The newest `size` entries; written and read on the event loop only, so it needs no lock."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: deque[dict[str, Any]] = deque(maxlen=size)

    def record(
        self,
        inspection: Inspection | None,
        *,
        request_id: str | None,
        wire: str,
        model: str,
        chain: str,
        tokens: tuple[int, int] | None,
        fallback: str | None,
        retried: bool,
    ) -> None:
        """One forwarded request. inspection None: forwarded uncompacted (fallback says why); tokens: before and
        after, None where they were not counted.
        """
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "request_id": request_id,
            "wire": wire,
            "model": model,
            "chain": chain,
            "tokens_before": tokens[0] if tokens is not None else None,
            "tokens_after": tokens[1] if tokens is not None else None,
            "fallback": fallback,
            "retried": retried,
            "messages": inspection.messages if inspection is not None else [],
            "unlisted": inspection.unlisted if inspection is not None else {},
        }
        self._entries.append(entry)

    def recent(self, n: int | None = None) -> list[dict[str, Any]]:
        """The newest n entries (all: None), newest first."""
        newest = list(reversed(self._entries))
        return newest if n is None else newest[:n]
