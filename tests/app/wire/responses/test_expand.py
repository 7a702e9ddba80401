"""The expand tool in Responses form (app.wire.responses.expand): where it is offered, a round's stream read event by
event, the turn a round sends back and the handles that show it again.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from app.wire import Responses
from app.wire.responses import ResponsesParsed
from app.wire.responses.expand import TOOL, ResponsesExpandTool, StreamedRound
from strategies.refs import EXPAND_TOOL
from tests.factories import function_call, function_output, item_message, reasoning
from tests.support.responses import USAGE, stream_events

EXPAND = ResponsesExpandTool()


def parse(body: dict[str, Any]) -> ResponsesParsed:
    parsed = Responses().parse(orjson.dumps(body), 64)
    assert isinstance(parsed, ResponsesParsed)
    return parsed


def expand_item(n: int, call_id: str = "call_x1", item_id: str | None = None) -> dict[str, Any]:
    return {"id": item_id or f"fc_x{n}", "type": "function_call", "status": "completed", "call_id": call_id,
            "name": EXPAND_TOOL, "arguments": json.dumps({"ref": f"{n:010x}"})}  # fmt: skip


def message(n: int, text: str) -> dict[str, Any]:
    return {**item_message("assistant", text), "id": f"msg_{n}", "status": "completed"}


def response(output: list[dict[str, Any]], n: int = 1, **fields: Any) -> dict[str, Any]:
    return {"id": f"resp_{n}", "object": "response", "status": "completed", "output": output, "usage": USAGE,
            "store": False, **fields}  # fmt: skip


def sse(events: list[dict[str, Any]]) -> list[bytes]:
    """Events as the stream carries them, without the blank line (as ExpandStream.feed takes them)."""
    numbered = [{**e, "sequence_number": n} if "sequence_number" not in e else e for n, e in enumerate(events)]
    return [f"event: {e['type']}\ndata: {json.dumps(e)}".encode() for e in numbered]


def data(out: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for chunk in out for line in chunk.split(b"\n") if line.startswith(b"data: ")]


def feed(round_: StreamedRound, events: list[bytes]) -> list[bytes]:
    return [out for event in events if (out := round_.feed(event)) is not None]


def test_the_tool_goes_after_the_clients_own_the_same_bytes_every_time() -> None:
    tools = [{"type": "custom", "name": "exec"}, {"type": "web_search"}, {"type": "local_shell"}]
    body = {"model": "gpt-5", "input": [item_message("user", "hi")], "tools": tools, "tool_choice": "required"}
    offered = EXPAND.offer(parse(body))
    assert offered is not None and isinstance(offered, ResponsesParsed)
    assert offered.body["tools"] == [*tools, TOOL] and offered.body["tool_choice"] == "required"
    assert TOOL == {"type": "function", "name": EXPAND_TOOL, "description": TOOL["description"],
                    "parameters": TOOL["parameters"], "strict": False}  # fmt: skip
    assert orjson.dumps(EXPAND.offer(parse(body)).body["tools"][-1]) == orjson.dumps(TOOL)  # type: ignore[union-attr]


def test_a_first_round_with_nothing_hidden_passes_byte_for_byte() -> None:
    events = sse(list(stream_events(response([reasoning(1), message(1, "All done here.")]))))
    round_ = StreamedRound()
    out = feed(round_, events)
    assert out == [e + b"\n\n" for e in events[:-1]]  # all but the terminal event, held
    assert list(round_.finish(None)) == [events[-1] + b"\n\n"]
    assert round_.expand_calls() == [] and not round_.other_calls()


def test_an_expand_calls_events_never_pass_and_the_next_round_runs_on() -> None:
    first = StreamedRound()
    out = feed(first, sse(list(stream_events(response([reasoning(1), expand_item(1)])))))
    assert first.expand_calls() == [("call_x1", json.dumps({"ref": f"{1:010x}"}))]
    shown = data(out)
    assert {e.get("output_index") for e in shown} == {None, 0}  # the reasoning; nothing of the call
    assert [e["sequence_number"] for e in shown] == list(range(len(shown)))
    second = StreamedRound(first, USAGE)
    out2 = feed(second, sse(list(stream_events(response([message(2, "Found it.")], n=2)))))
    later = data(out2)
    assert not any(e["type"] in ("response.created", "response.in_progress") for e in later)
    assert [e["sequence_number"] for e in later] == list(range(len(shown), len(shown) + len(later)))
    assert {e["output_index"] for e in later} == {1}
    (terminal,) = data(list(second.finish({"input_tokens": 1})))
    assert terminal["response"]["id"] == "resp_1"  # one id across the stream, as the SDK requires
    assert terminal["response"]["output"] == [reasoning(1), message(2, "Found it.")]
    assert terminal["response"]["usage"] == {"input_tokens": 1}
    assert terminal["sequence_number"] == len(shown) + len(later)


def test_items_announced_only_when_done_are_read_too() -> None:
    # The Codex stand-in's way (tests.support.codex): no `added`, no deltas, no sequence numbers on the items.
    output = [reasoning(1), expand_item(1)]
    done = [{"type": "response.output_item.done", "output_index": i, "item": item} for i, item in enumerate(output)]
    events = [{"type": "response.created", "response": response([])}, *done,
              {"type": "response.completed", "response": response(output)}]  # fmt: skip
    round_ = StreamedRound()
    out = data(feed(round_, [f"event: {e['type']}\ndata: {json.dumps(e)}".encode() for e in events]))
    assert [e.get("item") for e in out] == [None, reasoning(1)]
    assert round_.expand_calls() == [("call_x1", output[1]["arguments"])]


def test_a_round_cut_short_or_incomplete_calls_nothing_and_hides_its_call() -> None:
    output = [reasoning(1), expand_item(1)]
    round_ = StreamedRound()
    feed(round_, sse([*list(stream_events(response(output)))[:-1],
                      {"type": "response.incomplete", "response": response(output, status="incomplete")}]))  # fmt: skip
    assert round_.expand_calls() == []
    (terminal,) = data(list(round_.finish(None)))
    assert terminal["type"] == "response.incomplete" and terminal["response"]["output"] == [reasoning(1)]
    cut = StreamedRound()
    feed(cut, sse(list(stream_events(response(output)))[:-1]))
    assert cut.expand_calls() == [] and list(cut.finish(None)) == []


def test_the_turn_is_the_output_with_only_the_kept_calls_their_reasoning_in_place() -> None:
    no_content = {"id": "rs_2", "type": "reasoning", "summary": []}  # store: false, and no encrypted_content
    output = [reasoning(1), expand_item(1), no_content, expand_item(2, "call_x2"), expand_item(3, "a bad id!")]
    answer = EXPAND.answer(response(output), None)
    kept = [("call_x1", '{"ref":"0000000001"}'), ("compaction_expand_0000000003_2", '{"ref":"0000000003"}')]
    turn = answer.turn(kept)
    items = turn["_wire"]["output"]
    assert items[0] == reasoning(1)  # as it came
    assert [(i.get("id"), i.get("call_id")) for i in items[1:]] == [
        ("fc_x1", "call_x1"),
        ("fc_x3", "compaction_expand_0000000003_2"),  # the model's id no API takes: the proxy's, the item's own id
    ]
    assert [c["id"] for c in turn["tool_calls"]] == [cid for cid, _ in kept]
    assert answer.handles(kept) == ("i:rs_1", "c:call_x1:fc_x1", "c:compaction_expand_0000000003_2:fc_x3")
    # An item without an id cannot be found again: the round is shown again as its calls alone.
    assert EXPAND.answer(response([{**reasoning(1), "id": None}, expand_item(1)]), None).handles(kept[:1]) == ()


def test_a_whole_answer_keeps_what_every_round_showed_and_the_last_rounds_id() -> None:
    first = EXPAND.answer(response([reasoning(1), message(1, "Let me look."), expand_item(1)]), None)
    last = EXPAND.answer(response([reasoning(2), message(2, "Found it.")], n=2), first)
    body = last.for_client({"input_tokens": 2})
    assert body["id"] == "resp_2" and body["usage"] == {"input_tokens": 2}
    assert body["output"] == [reasoning(1), message(1, "Let me look."), reasoning(2), message(2, "Found it.")]


def test_a_remembered_round_is_shown_again_between_the_items_it_went_with() -> None:
    history = [item_message("user", "Fix it."), function_call(0), function_output(0, 100), item_message("user", "Go.")]
    shown = [reasoning(1), message(1, "Let me look."), reasoning(2), message(2, "Found it.")]
    parsed = parse({"model": "gpt-5", "input": [*history, *shown, item_message("user", "Next.")]})
    turn = EXPAND.turn_again([("call_x1", '{"ref":"0000000001"}')], ("i:rs_1", "i:msg_1", "c:call_x1:fc_x1"))
    result = {"role": "tool", "tool_call_id": "call_x1", "content": "the original"}
    at = 4  # after the client's messages the round followed
    messages = [*parsed.messages[:at], turn, result, *parsed.messages[at:]]
    sent = json.loads(Responses().render(parsed, messages))["input"]
    assert sent[len(history) :] == [
        reasoning(1),
        message(1, "Let me look."),
        {"type": "function_call", "id": "fc_x1", "status": "completed", "call_id": "call_x1", "name": EXPAND_TOOL,
         "arguments": '{"ref":"0000000001"}'},
        {"type": "function_call_output", "call_id": "call_x1", "output": "the original"},
        reasoning(2),
        message(2, "Found it."),
        item_message("user", "Next."),
    ]  # fmt: skip
    # Without the items it went with (the client dropped one), the call goes alone, with no id to pair.
    parsed = parse({"model": "gpt-5", "input": [*history, *shown[1:], item_message("user", "Next.")]})
    messages = [*parsed.messages[:at], turn, result, *parsed.messages[at:]]
    sent = json.loads(Responses().render(parsed, messages))["input"]
    assert sent[len(history)] == {"type": "function_call", "call_id": "call_x1", "name": EXPAND_TOOL,
                                  "arguments": '{"ref":"0000000001"}'}  # fmt: skip
    assert sent[len(history) + 2 :] == [*shown[1:], item_message("user", "Next.")]
