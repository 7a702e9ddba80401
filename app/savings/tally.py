"""Counts of the savings ledger, as they are added up in a process and kept in a store: totals per wire format and
model, the same figures per minute (one series for the whole proxy), and the smallest context window learned per
wire format and model. Only counts and the names they are kept under: never any message content.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.upstream.models.usage import KINDS

BUCKET_SECONDS = 60
OTHER = "other"  # the model past max_models, and any fallback reason past MAX_REASONS
# A model name is the client's to choose: kept to this many characters.
MAX_MODEL_CHARS = 128
# Fallback reasons are the strategies' (a plugin's too): at most this many are kept apart.
MAX_REASONS = 32

# What is counted per wire format and model. requests: answered through a compacted route; counted: of them, with
# tokens counted before and after compaction (not those forwarded uncompacted past the deadline); usage_reported:
# upstream answers (each expand round is one) whose usage stated their input, in the KINDS.
REQUESTS, COUNTED, USAGE_REPORTED = "requests", "counted", "usage_reported"
TOKENS_BEFORE, TOKENS_AFTER = "tokens_before", "tokens_after"
EXPAND_ROUND, EXPAND_CALL, FALLBACK = "expand_round:", "expand_call:", "fallback:"  # field prefixes, + outcome/reason
# What the per-minute series holds.
SERIES_FIELDS = (REQUESTS, TOKENS_BEFORE, TOKENS_AFTER, *KINDS)

Totals = dict[tuple[str, str, str], int]  # (wire, model, field) -> count
Series = dict[tuple[int, str], int]  # (the minute's start, in Unix seconds, field) -> count
Windows = dict[tuple[str, str], int]  # (wire, model) -> the smallest context window learned


def minute_of(now: float) -> int:
    """The start of the minute `now` falls in, in Unix seconds: wall-clock, so replicas put a moment in one bucket."""
    return int(now) // BUCKET_SECONDS * BUCKET_SECONDS


def model_name(model: object) -> str:
    """A request's model as the ledger keeps it: text, at most MAX_MODEL_CHARS."""
    return model[:MAX_MODEL_CHARS] if isinstance(model, str) else ""


@dataclass
class Tally:
    totals: Totals = field(default_factory=dict)
    series: Series = field(default_factory=dict)
    windows: Windows = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.totals or self.series or self.windows)

    def add(self, wire: str, model: str, name: str, count: int, minute: int | None = None) -> None:
        """count more of `name` for the model; in the minute's series too when given (and `name` is kept there)."""
        if count <= 0:
            return
        key = (wire, model, name)
        self.totals[key] = self.totals.get(key, 0) + count
        if minute is not None and name in SERIES_FIELDS:
            self.series[(minute, name)] = self.series.get((minute, name), 0) + count

    def window(self, wire: str, model: str, window: int) -> None:
        current = self.windows.get((wire, model))
        self.windows[(wire, model)] = window if current is None else min(current, window)

    def merge(self, other: Tally, *, oldest_minute: int | None = None) -> None:
        """other's counts added to these; minutes before oldest_minute left out (past the history kept)."""
        for key, count in other.totals.items():
            self.totals[key] = self.totals.get(key, 0) + count
        for (minute, name), count in other.series.items():
            if oldest_minute is None or minute >= oldest_minute:
                self.series[(minute, name)] = self.series.get((minute, name), 0) + count
        for (wire, model), window in other.windows.items():
            self.window(wire, model, window)

    def renamed(self, models: set[str], to: str) -> Tally:
        """The tally with the rows of these models counted under `to` (the models the store would not take)."""
        out = Tally(series=dict(self.series))
        for (wire, model, name), count in self.totals.items():
            out.add(wire, to if model in models else model, name, count)
        out.windows = {key: window for key, window in self.windows.items() if key[1] not in models}
        return out

    def models(self) -> set[str]:
        return {model for _, model, _ in self.totals} | {model for _, model in self.windows}
