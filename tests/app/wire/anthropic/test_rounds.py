"""wire.anthropic.rounds: an expand round's assistant turn, as it goes upstream and as it is shown again."""

from __future__ import annotations

from app.wire.anthropic.rounds import BLOCKS, round_turn, shown_again, shown_handles, turn_again
from strategies.messages import WIRE_KEY
from strategies.refs import EXPAND_TOOL, expand_turn
from tests.support.scripted_messages import redacted, text, thinking, use

CALL = ("toolu_1", '{"ref":"0a1b2c3d4e"}')
ROUND = [redacted("b3BhcXVl"), thinking("Model: look."), use("toolu_1", EXPAND_TOOL, ref="0a1b2c3d4e"), text("Hm.")]


def test_the_turn_is_the_models_blocks_with_only_the_kept_calls() -> None:
    left_out = use("toolu_2", EXPAND_TOOL, ref="0a1b2c3d4e")
    turn = round_turn([*ROUND, left_out], [CALL])
    assert turn[WIRE_KEY][BLOCKS] == ROUND
    assert [c["id"] for c in turn["tool_calls"]] == ["toolu_1"] and turn[WIRE_KEY]["text"] == "Model: look."


def test_a_call_whose_id_the_proxy_made_gets_it_and_the_arguments_as_kept() -> None:
    made = (f"{EXPAND_TOOL}_0a1b2c3d4e_0", '{"ref":"0a1b2c3d4e","start_line":3}')
    turn = round_turn([use("bad id!", EXPAND_TOOL, start_line=3, ref="0a1b2c3d4e")], [made])
    assert turn[WIRE_KEY][BLOCKS] == [use(made[0], EXPAND_TOOL, ref="0a1b2c3d4e", start_line=3)]


def test_shown_again_the_client_blocks_go_back_where_they_were() -> None:
    [tag] = shown_handles(ROUND, [CALL])
    assert tag.startswith("sscs:") and len(tag) < 40  # a pattern and a digest: no content
    message = turn_again([CALL], (tag,))
    client = [redacted("b3BhcXVl"), thinking("Model: look."), {**text("Hm."), "cache_control": {"type": "ephemeral"}}]
    blocks, positions, took = shown_again(message, [*client, text("Found.")], 0)
    assert blocks == [*client[:2], ROUND[2], client[2]] and positions == [0, 1, None, 2] and took == 3
    # Not the blocks the round had (the client dropped its thinking, say): the round is its calls alone.
    assert shown_again(message, [text("Hm."), text("Found.")], 0) == ([ROUND[2]], [None], 0)
    assert shown_handles([use("toolu_1", EXPAND_TOOL, ref="0a1b2c3d4e")], [CALL]) == ()
    assert turn_again([CALL], ()) == expand_turn([CALL])
