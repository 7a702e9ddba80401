"""What a chain did to each message (strategies.diff), followed through the chain step by step."""

from __future__ import annotations

import copy
from dataclasses import replace

from bench.notes.stand_in import DictNotes, StandInSummariser
from strategies import BUILTINS, Chain, Context, Registry, TokenCounter
from strategies.diff import Diff, MessageDiff, align
from strategies.messages import Message
from tests.factories import agent_loop, call, coding_session, output, qa_chat, result, system, user
from tests.strategies.harness import ref
from tests.strategies.test_degrade import left_out_refs, window


def diff(spec: str, messages: list[Message], ctx: Context) -> tuple[list[MessageDiff], list[Message]]:
    watched = Diff(messages)
    out = Chain.parse(spec, Registry(BUILTINS)).run(messages, ctx, watch=watched.step).messages
    return watched.rows(), out


def actions(rows: list[MessageDiff]) -> list[tuple[int | None, str]]:
    return [(row.index, row.action) for row in rows]


def test_old_tool_results_masked_with_their_refs_the_newest_kept(ctx: Context) -> None:
    messages = agent_loop(4, 3000)
    rows, out = diff("mask(keep=1,epoch=0,min_gain=0)", messages, ctx)
    assert actions(rows) == [(0, "kept"), (1, "kept")] + [
        (i, "kept" if i % 2 == 0 or i == 9 else "masked") for i in range(2, 10)
    ]
    for row in rows:
        assert row.at == row.index  # nothing went, nothing was added
        if row.action == "masked":
            assert row.refs == (ref(messages[row.index]["content"]),)
            assert (row.role, row.by, row.chars_before) == ("tool", ("mask",), 3000)
            assert row.chars_after == len(out[row.at]["content"]) < 200
        else:
            assert row.refs == () and row.chars_after == row.chars_before


def test_units_the_window_drops_are_dropped_by_it_pinned_and_newest_kept(ctx: Context) -> None:
    messages = qa_chat(20)
    rows, out = diff("window(budget=200)", messages, ctx)
    gone = [row for row in rows if row.action == "dropped"]
    assert gone and all(row.by == ("window",) and row.chars_after == 0 and row.at is None for row in gone)
    dropped = [row.index for row in gone]
    assert dropped == list(range(dropped[0], dropped[-1] + 1))  # one block of whole pairs, oldest first
    assert dropped[0] == 3 and len(dropped) % 2 == 0  # after the system prompt and the first pair (pinned)
    kept = [row for row in rows if row.action == "kept"]
    assert [out[row.at] for row in kept if row.at is not None] == out
    assert len(kept) + len(dropped) == len(messages)


def test_minify_then_mask_is_masked_by_both_and_a_merely_minified_result_is_minified(ctx: Context) -> None:
    repeating = "same line\n" * 400 + "tail\n"
    first = output(0, 3000) + repeating  # still long once minified: masked
    messages = [system("s"), user("go"), call("c0"), result("c0", first), call("c1"), result("c1", repeating + "!")]
    rows, _ = diff("minify,mask(keep=1,epoch=0,min_gain=0)", messages, ctx)
    assert [(row.index, row.action, row.by) for row in rows if row.action != "kept"] == [
        (3, "masked", ("minify", "mask")),
        (5, "minified", ("minify",)),
    ]
    assert rows[3].refs == (ref(first),)  # the client's original, not minify's rewrite of it
    assert rows[5].chars_after < rows[5].chars_before == len(repeating) + 1


def test_a_result_cut_head_and_tail_is_cut_with_its_ref(ctx: Context) -> None:
    messages = agent_loop(2, 5000)
    rows, _ = diff("mask(keep=5,max_chars=1000)", messages, ctx)
    cut = [row for row in rows if row.action == "cut"]
    assert [row.index for row in cut] == [3, 5]
    assert all(row.refs == (ref(messages[row.index]["content"]),) and row.chars_after < 1200 for row in cut)


def test_units_left_out_past_the_limit_are_dropped_with_the_left_out_markers_ref(counter: TokenCounter) -> None:
    messages = coding_session(60)
    ctx = window(counter, 4096)
    rows, out = diff("mask(epoch=0,min_gain=0)", messages, ctx)
    (block,) = left_out_refs(out)
    (marker,) = [row for row in rows if row.action == "added"]
    assert (marker.role, marker.by, marker.refs, marker.at, marker.index) == ("user", ("mask",), (block,), 2, None)
    assert rows.index(marker) == 2  # listed where it went: after the task, before the first message it stands for
    gone = [row for row in rows if row.action == "dropped"]
    assert gone and all(row.refs == (block,) and row.by == ("mask",) for row in gone)
    assert [row.index for row in gone] == list(range(2, 2 + len(gone)))


def test_folded_turns_are_folded_into_the_notes_which_are_added(counter: TokenCounter) -> None:
    ctx = Context(model="gpt-4o", tokens=counter, summariser=StandInSummariser(), notes_cache=DictNotes())
    messages = qa_chat(11, answer="booked as code {i:03}.")
    rows, out = diff("notes(budget=280)", messages, ctx)
    assert [row.index for row in rows if row.action == "folded"] == list(range(3, 15))  # pairs 1 to 6
    (notes,) = [row for row in rows if row.action == "added"]
    assert (notes.at, notes.by, rows.index(notes)) == (1, ("notes",), 1)
    assert notes.after is out[1]


def test_a_fallback_step_is_followed_too(ctx: Context) -> None:
    repeated = output(0, 3000)
    messages = [user("go"), call("c0"), result("c0", repeated), call("c1"), result("c1", repeated)]
    rows, _ = diff("mask", messages, replace(ctx, expandable=False))  # mask's fallback: dedupe
    # The second copy points at the first; with no expand tool to offer, its stub has no ref.
    assert [(row.index, row.action, row.by) for row in rows if row.action != "kept"] == [(4, "masked", ("dedupe",))]
    assert rows[4].refs == () and rows[4].chars_after < 100


def test_calls_dropped_with_their_results_cut_the_message_that_made_them(ctx: Context) -> None:
    messages = [user("go"), {**call("c0"), "tool_calls": [*call("c0")["tool_calls"], *call("c1")["tool_calls"]]}]
    messages += [result("c0", output(0, 4000)), result("c1", output(1, 4000)), call("c2"), result("c2", "ok")]
    spec = "shorten_tools(max_tool_chars=0,full_tool_outputs=1,max_tool_calls=2,epoch=0,min_gain=0)"
    rows, _ = diff(spec, messages, ctx)
    assert rows[1].action == "cut" and rows[1].by == ("shorten_tools",)  # one of its two calls went
    assert rows[2].action == "dropped"


def test_align_pairs_a_rewritten_message_by_its_call_id_and_adds_what_is_new() -> None:
    before = [user("a"), call("c0"), result("c0", "long"), user("b")]
    after = [before[0], {"role": "user", "content": "new"}, before[1], result("c0", "stub"), before[3]]
    assert align(before, after) == [0, None, 1, 2, 3]
    assert align(before, [before[0], before[3]]) == [0, 3]


def test_a_step_that_copies_every_message_still_has_each_followed_in_order() -> None:
    # A plugin may return copies of everything: then nothing pairs by identity, everything by what it keeps.
    before = agent_loop(150, 50)
    after = copy.deepcopy(before)
    assert align(before, after) == list(range(len(before)))
    watched = Diff(before)
    watched.step("copying", before, after)
    assert {row.action for row in watched.rows()} == {"kept"}
