"""What the expansion memory keeps of a round, read back as untrusted (app.expansion.memory)."""

from __future__ import annotations

import json

import pytest

from app.cache.memory import MemoryBackend
from app.expansion.memory import MAX_HANDLES, ExpansionMemory
from app.expansion.rounds import Round


def memory() -> ExpansionMemory:
    return ExpansionMemory(MemoryBackend(ttl=60, max_entries=10))


def test_a_rounds_handles_are_remembered_with_its_calls() -> None:
    remembered = memory()
    rounds = [
        Round(3, "ab", (("call_1", '{"ref":"0a1b2c3d4e"}'),), ("i:rs_1", "c:call_1:fc_1")),
        Round(5, "cd", (("c2", "{}"),)),
    ]
    remembered.remember("k", rounds)
    assert remembered.recall("k") == rounds


def test_rounds_remembered_without_handles_read_as_before() -> None:
    remembered = memory()
    remembered.backend.put("k", json.dumps([[3, "ab", [["call_1", "{}"]]]]))
    assert remembered.recall("k") == [Round(3, "ab", (("call_1", "{}"),))]


@pytest.mark.parametrize(
    "handles",
    ["i:rs_1", [1, 2], ["x" * 1000], ["h"] * (MAX_HANDLES + 1)],
    ids=["not-a-list", "not-strings", "too-long", "too-many"],
)
def test_malformed_handles_drop_their_round(handles: object) -> None:
    remembered = memory()
    good = [4, "ef", [["c", "{}"]]]
    remembered.backend.put("k", json.dumps([[3, "ab", [["call_1", "{}"]], handles], good]))
    assert remembered.recall("k") == [Round(4, "ef", (("c", "{}"),))]
