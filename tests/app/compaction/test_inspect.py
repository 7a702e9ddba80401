"""The inspect ring and its entries (app.compaction.inspect): bounded in entries and in what one entry holds."""

from __future__ import annotations

import json

import pytest

from app import Settings
from app.compaction.compactor import build_compactor
from app.compaction.inspect import PREVIEW_CHARS, Inspection, InspectRing, preview
from app.wire import ChatCompletions
from strategies import BUILTINS, Chain, Context, Encodings, Registry, TokenCounter
from strategies.diff import Diff, MessageDiff
from strategies.messages import Message
from tests.factories import agent_loop, call


@pytest.fixture(scope="module")
def ctx() -> Context:
    return Context(model="gpt-4o", tokens=TokenCounter(Encodings()))


def rows(messages: list[Message], ctx: Context, spec: str = "mask(keep=1,epoch=0,min_gain=0)") -> list[MessageDiff]:
    diff = Diff(messages)
    Chain.parse(spec, Registry(BUILTINS)).run(messages, ctx, watch=diff.step)
    return diff.rows()


def record(ring: InspectRing, request_id: str) -> None:
    tokens = (10, 5)
    ring.record(None, request_id=request_id, wire="chat.completions", model="m", chain="none", tokens=tokens,
                fallback=None, retried=False)  # fmt: skip


def test_the_ring_keeps_its_size_newest_first() -> None:
    ring = InspectRing(2)
    for i in range(5):
        record(ring, f"r{i}")
    assert [e["request_id"] for e in ring.recent()] == ["r4", "r3"]
    assert [e["request_id"] for e in ring.recent(1)] == ["r4"]


def test_an_entry_lists_every_row_with_previews_within_its_chars(ctx: Context) -> None:
    messages = agent_loop(3, 3000)
    inspection = Inspection.of(rows(messages, ctx), limit=50_000)
    assert len(inspection.messages) == len(messages) and inspection.unlisted == {}
    masked = inspection.messages[3]
    assert (masked["action"], masked["call_ids"]) == ("masked", ["call_0"])
    assert masked["before"] == messages[3]["content"][: PREVIEW_CHARS - 1] + "…"  # a preview, never the whole text
    assert masked["after"].startswith("[read output elided: 3,000 chars") and len(masked["after"]) <= PREVIEW_CHARS
    kept = inspection.messages[7]
    assert kept["action"] == "kept" and kept["after"] is None and len(kept["before"]) == PREVIEW_CHARS


def test_past_its_chars_an_entry_drops_previews_then_counts_the_rows_it_cannot_list(ctx: Context) -> None:
    messages = agent_loop(20, 3000)
    inspection = Inspection.of(rows(messages, ctx), limit=790)
    listed = inspection.messages
    assert 0 < len(listed) < len(messages)
    assert len(listed) + sum(inspection.unlisted.values()) == len(messages)
    assert set(inspection.unlisted) == {"kept", "masked"}  # counted by what happened to them
    assert len(json.dumps(listed)) < 1200
    assert "before" in listed[0] and any("before" not in row for row in listed)  # listed, its previews past the cap


def test_the_compactor_works_a_diff_out_only_while_the_ring_is_on() -> None:
    raw = json.dumps({"model": "gpt-4o", "messages": agent_loop(3, 3000)}).encode()
    for size, made in ((0, False), (2, True)):
        compactor = build_compactor(Settings(inspect_requests=size))
        compacted = compactor.compact_sync(
            raw, ChatCompletions(), compactor.chain_for("mask(keep=1,epoch=0,min_gain=0)")
        )
        assert (compacted.inspection is not None) is made
        if compacted.inspection is not None:
            assert [row["action"] for row in compacted.inspection.messages].count("masked") == 2


def test_a_call_is_previewed_by_its_name_and_arguments() -> None:
    assert preview(call("c0", "read", {"path": "a.py"})) == 'read({"path": "a.py"})'
