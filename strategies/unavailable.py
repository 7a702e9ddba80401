"""A strategy that cannot do its work right now because something outside failed (a summariser that is down, a
cache that cannot be reached) raises Unavailable; the chain then runs the strategy's fallback chain instead.
A leaf module, so that the services' own protocols (strategies.notes_io) can use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class Unavailable(Exception):
    """reason: short and machine-readable, also the X-Compaction-Fallback value; details: what the strategy
    found out before it failed, for the stats. Raised only for failures outside the proxy's control, so that
    a bug still surfaces as a bug.
    """

    def __init__(self, reason: str, detail: str = "", details: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        self.details = dict(details or {})
