"""Reversible compaction, the proxy's side: the expand tool offered to the model when the forwarded messages hold a
stub with a ref (strategies.refs), its calls answered by the proxy itself from the request's own messages, and
the rounds remembered so that later requests show them again (memory).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.wire import Parsed, WireFormat
from strategies import Context, Message
from strategies.refs import Originals


@dataclass(frozen=True)
class Expansion:
    """A request the expand tool was offered on, with what its rounds need.

    offered: the request with the tool; plain: without it (the last round, once expand_max_rounds are used);
    forwarded: the compacted messages sent first; originals: what refs resolve to; memory_key: where the
    conversation's rounds are remembered (None: nowhere); at, anchor: the client's messages the rounds follow
    (their number, and the prefix digest of all of them, hex); ctx: the request's Context, which counts the rounds
    in the model's tokens against its limits.
    """

    wire: WireFormat
    offered: Parsed
    plain: Parsed
    forwarded: list[Message]
    originals: Originals
    memory_key: str | None
    at: int
    anchor: str
    ctx: Context

    def added_tools(self) -> list[Any]:
        """The tools the proxy adds to the request (for the dry run), in the body's own shape."""
        plain, offered = self.plain.body.get("tools") or [], self.offered.body.get("tools") or []
        return list(offered[len(plain) :])
