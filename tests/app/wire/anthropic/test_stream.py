"""wire.anthropic.stream: a round's Messages stream read event by event, what the client is sent of it."""

from __future__ import annotations

from typing import Any

import orjson

from app.wire.anthropic.stream import StreamedRound
from strategies.refs import EXPAND_TOOL
from tests.support.messages_upstream import message_events
from tests.support.scripted_messages import text, thinking, use


def answer(*blocks: dict[str, Any], stop: str = "tool_use", number: int = 1) -> dict[str, Any]:
    usage = {"input_tokens": 10, "cache_read_input_tokens": 4, "output_tokens": 3}
    content = list(blocks)
    return {
        "id": f"msg_{number}",
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": stop,
        "usage": usage,
    }


def fed(reader: StreamedRound, message: dict[str, Any]) -> list[bytes]:
    out = [reader.feed(event.removesuffix(b"\n\n")) for event in message_events(message)]
    return [o for o in out if o is not None]


def data(events: list[bytes]) -> list[dict[str, Any]]:
    return [orjson.loads(e.split(b"data: ", 1)[1]) for e in events]


def test_a_round_without_an_expand_call_passes_byte_for_byte() -> None:
    message = answer(thinking("Model: hm."), text("Hello."), stop="end_turn")
    reader = StreamedRound(None)
    out = fed(reader, message)
    assert reader.expand_calls() == [] and not reader.other_calls()
    assert b"".join([*out, *reader.finish(None)]) == b"".join(message_events(message))


def test_an_expand_call_is_held_back_and_the_next_round_numbers_on() -> None:
    first = StreamedRound(None)
    out = data(fed(first, answer(thinking("Model: look."), use("toolu_1", EXPAND_TOOL, ref="0a1b2c3d4e"))))
    assert [e["type"] for e in out] == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
    ]
    assert first.expand_calls() == [("toolu_1", '{"ref":"0a1b2c3d4e"}')]
    turn = first.turn([("toolu_1", '{"ref":"0a1b2c3d4e"}')])
    assert turn["_wire"]["blocks"] == [thinking("Model: look."), use("toolu_1", EXPAND_TOOL, ref="0a1b2c3d4e")]
    second = StreamedRound(first, first.usage)
    later = data(fed(second, answer(text("Found."), use("toolu_2", "read"), number=2)))
    # No second message_start; the blocks go on from 1; the final message_delta and message_stop are held.
    assert [e["type"] for e in later][0] == "ping" and "message_start" not in [e["type"] for e in later]
    assert {e["index"] for e in later if "index" in e} == {1, 2}
    total = {"input_tokens": 20, "cache_read_input_tokens": 8, "output_tokens": 6}
    end = data(list(second.finish(total)))
    assert [e["type"] for e in end] == ["message_delta", "message_stop"]
    assert end[0]["usage"] == total and end[0]["delta"]["stop_reason"] == "tool_use"  # the client's call is left


def test_the_stop_reason_is_end_turn_where_no_call_of_the_clients_is_left() -> None:
    reader = StreamedRound(None)
    fed(reader, answer(thinking("Model: again."), use("toolu_3", EXPAND_TOOL, ref="0a")))
    assert data(list(reader.finish(None)))[0]["delta"]["stop_reason"] == "end_turn"


def test_a_cut_off_round_is_not_the_proxys_to_answer_and_odd_events_pass() -> None:
    reader = StreamedRound(None)
    fed(reader, answer(use("toolu_4", EXPAND_TOOL, ref="0a"), stop="max_tokens"))
    assert reader.expand_calls() == []
    assert reader.feed(b": a comment") == b": a comment\n\n"
    assert reader.feed(b'event: error\ndata: {"type": "error"}') == b'event: error\ndata: {"type": "error"}\n\n'
