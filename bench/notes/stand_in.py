"""Deterministic stand-ins for what the proxy gives the notes strategy: a summariser and a notes cache.

The summariser's notes are the lines, of the current notes and the next turns, that carry a digit or a
capitalised name, each once, in order: codes, amounts and names survive, chit-chat goes. A crude stand-in for a
model: it never replaces a decision, so a value a later turn changed stays in the notes next to the new one.
bench.notes and bench.complexity run it; the tests of the notes strategy and of the app do too, and the tests'
stand-in upstream answers summariser calls with digest().
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

from strategies import Message
from strategies.notes_fold import NO_NOTES, read_transcript
from strategies.notes_io import NotesUnavailable

NOTHING = "- nothing notable yet"
_CAPITALISED = re.compile(r"[A-Z][a-z]+")


def informative(line: str) -> bool:
    # The speaker prefix ("user: ", "tool result (call_3): ") is not what the line says.
    said = line.split(": ", 1)[-1]
    words = said.split()
    return bool(re.search(r"\d", said)) or any(_CAPITALISED.fullmatch(w.strip(".,;:!?()")) for w in words[1:])


def said(turn: dict[str, Any], *, first_line_only: bool = False) -> list[str]:
    """One turn of the transcript as `speaker: text` lines, each line of its text on its own (only the first with
    first_line_only), then its calls.
    """
    role = turn["role"]
    speaker = f"tool result ({turn.get('tool_call_id') or turn.get('name')})" if role in ("tool", "function") else role
    text = turn.get("content")
    lines = text.splitlines() if text else []
    out = [f"{speaker}: {line}" for line in (lines[:1] if first_line_only else lines)]
    return out + [f"{role} called {call['name']}({call['arguments']})" for call in turn.get("tool_calls", [])]


def digest(
    user_text: str, *, first_line_only: bool = False, max_words: int | None = None, nothing: str = NOTHING
) -> str:
    """The notes for one summariser call, from its user message (see strategies.notes_fold.summariser_messages).

    first_line_only: only each message's first line (a list of search results below it is left out).
    max_words: past it, the newest lines that fit. nothing: the notes when no line is informative; "" makes the
    answer empty, which the strategy treats as a failed fold (summariser_empty) and falls back.
    """
    head, _, turns = user_text.partition("\n\nNext turns:\n")
    notes = head.removeprefix("Current notes:\n")
    lines = [] if notes in (NO_NOTES, nothing) else notes.splitlines()
    lines += [
        line
        for turn in read_transcript(turns)
        for line in said(turn, first_line_only=first_line_only)
        if informative(line)
    ]
    lines = list(dict.fromkeys(lines))
    if max_words is not None:
        words = sum(len(line.split()) for line in lines)
        while lines and words > max_words:
            words -= len(lines.pop(0).split())
    return "\n".join(lines) or nothing


class StandInSummariser:
    """The Summariser protocol over digest(), recording every call; `fail` makes calls raise instead, `answer`
    replaces digest. The keyword arguments after `*` are digest()'s.
    """

    def __init__(
        self,
        context_window: int = 128_000,
        default_model: str | None = None,
        *,
        first_line_only: bool = False,
        max_words: int | None = None,
        nothing: str = NOTHING,
    ) -> None:
        self.window = context_window
        self.model = default_model
        self.calls: list[list[Message]] = []
        self.fail: NotesUnavailable | None = None
        self.answer: Callable[[str], str] = partial(
            digest, first_line_only=first_line_only, max_words=max_words, nothing=nothing
        )

    @property
    def default_model(self) -> str | None:
        return self.model

    def context_window(self, model: str) -> int:
        return self.window

    def summarise(self, messages: list[Message], model: str) -> str:
        self.calls.append(messages)
        if self.fail is not None:
            raise self.fail
        return self.answer(messages[-1]["content"])


class DictNotes:
    """The NotesCache protocol over a dict, single-threaded. Folds asked for ahead of need wait in `ahead`, one per
    key, until run_ahead(): what the proxy's background task set does before the next turn arrives. Counts the
    folds made, and how many of them were made ahead.
    """

    def __init__(self) -> None:
        self.notes: dict[str, str] = {}
        self.ahead: list[tuple[str, Callable[[], None]]] = []
        self.folds = 0
        self.folds_ahead = 0
        self._running_ahead = False

    def get(self, key: str) -> str | None:
        return self.notes.get(key)

    def fold(self, key: str, make: Callable[[], str]) -> str:
        if key not in self.notes:
            self.notes[key] = make()
            self.folds += 1
            self.folds_ahead += self._running_ahead
        return self.notes[key]

    def fold_ahead(self, key: str, job: Callable[[], None]) -> bool:
        # As the proxy's background task set: one job per key at a time.
        if any(k == key for k, _ in self.ahead):
            return False
        self.ahead.append((key, job))
        return True

    def run_ahead(self) -> None:
        jobs, self.ahead = self.ahead, []
        self._running_ahead = True
        try:
            for _, job in jobs:
                try:
                    job()
                except NotesUnavailable:
                    pass  # as in the proxy: a fold made ahead that fails is only logged; the request will try again
        finally:
            self._running_ahead = False
