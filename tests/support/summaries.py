"""A deterministic summariser for the tests: the notes are the lines, of the current notes and the next turns,
that carry a digit or a capitalised name, each once, in order. Codes, amounts and names survive; chit-chat goes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from strategies.notes_fold import NO_NOTES, read_transcript
from strategies.notes_io import NotesUnavailable

NOTHING = "- nothing notable yet"
_CAPITALISED = re.compile(r"[A-Z][a-z]+")


def informative(line: str) -> bool:
    # The speaker prefix ("user: ", "tool result (call_3): ") is not what the line says.
    said = line.split(": ", 1)[-1]
    words = said.split()
    return bool(re.search(r"\d", said)) or any(_CAPITALISED.fullmatch(w.strip(".,;:!?()")) for w in words[1:])


def said(turn: dict[str, Any]) -> list[str]:
    """One turn of the transcript as `speaker: text` lines, each line of its text on its own."""
    role = turn["role"]
    speaker = f"tool result ({turn.get('tool_call_id') or turn.get('name')})" if role in ("tool", "function") else role
    text = turn.get("content")
    lines = [f"{speaker}: {line}" for line in text.splitlines()] if text else []
    lines += [f"{role} called {call['name']}({call['arguments']})" for call in turn.get("tool_calls", [])]
    return lines


def digest(user_text: str) -> str:
    """The notes for one summariser call, from its user message (see strategies.notes_fold.summariser_messages)."""
    head, _, turns = user_text.partition("\n\nNext turns:\n")
    notes = head.removeprefix("Current notes:\n")
    lines = [] if notes in (NO_NOTES, NOTHING) else notes.splitlines()
    lines += [line for turn in read_transcript(turns) for line in said(turn) if informative(line)]
    return "\n".join(dict.fromkeys(lines)) or NOTHING


class DigestSummariser:
    """The Summariser protocol over digest(), recording every call; `fail` makes calls raise instead."""

    def __init__(self, context_window: int = 128_000, default_model: str | None = None) -> None:
        self.window = context_window
        self.model = default_model
        self.calls: list[list[dict[str, Any]]] = []
        self.fail: NotesUnavailable | None = None
        self.answer: Callable[[str], str] = digest

    @property
    def default_model(self) -> str | None:
        return self.model

    def context_window(self, model: str) -> int:
        return self.window

    def summarise(self, messages: list[dict[str, Any]], model: str) -> str:
        self.calls.append(messages)
        if self.fail is not None:
            raise self.fail
        return self.answer(messages[-1]["content"])


class DictNotes:
    """The NotesCache protocol over a dict, single-threaded; jobs asked for ahead of need wait in `ahead`
    until run_ahead() (what the app's background task set does a little later).
    """

    def __init__(self) -> None:
        self.notes: dict[str, str] = {}
        self.ahead: list[tuple[str, Callable[[], None]]] = []

    def get(self, key: str) -> str | None:
        return self.notes.get(key)

    def fold(self, key: str, make: Callable[[], str]) -> str:
        if key not in self.notes:
            self.notes[key] = make()
        return self.notes[key]

    def fold_ahead(self, key: str, job: Callable[[], None]) -> bool:
        if any(k == key for k, _ in self.ahead):
            return False
        self.ahead.append((key, job))
        return True

    def run_ahead(self) -> None:
        jobs, self.ahead = self.ahead, []
        for _, job in jobs:
            job()
