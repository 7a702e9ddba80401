"""app.wire.anthropic and app.wire.cache_control: Messages bodies to the conversation view and back, small cases."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from app.edge.errors import ApiError
from app.wire import AnthropicMessages
from app.wire.anthropic import CARRIED, AnthropicParsed
from bench.compaction.wire_forms import messages_problems
from strategies import Message, TokenCounter
from strategies.messages import WIRE_KEY

WIRE = AnthropicMessages()
EPHEMERAL = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}


def thinking(text: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": f"sig-{text}"}


def use(id: str, **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": "read", "input": input}


def result(id: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": id, "content": content, **extra}


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": value, **extra}


def session() -> dict[str, Any]:
    """Two tool rounds after the task, the latest turn last; breakpoints on system[1] and the last block."""
    return {
        "model": "claude-sonnet-4-5",
        "system": [text("billing line"), text("You are an agent.", cache_control=EPHEMERAL)],
        "messages": [
            {"role": "user", "content": [text("Fix the bug.")]},
            {"role": "assistant", "content": [thinking("look"), text("Reading."), use("t1", path="a.py")]},
            {"role": "user", "content": [result("t1", "A" * 50, cache_control=EPHEMERAL), text("note")]},
            {"role": "assistant", "content": [thinking("again"), use("t2", path="b.py")]},
            {"role": "user", "content": [result("t2", "B" * 50, cache_control=EPHEMERAL)]},
        ],
    }


def parse(body: dict[str, Any]) -> AnthropicParsed:
    parsed = WIRE.parse(orjson.dumps(body), 64)
    assert isinstance(parsed, AnthropicParsed)
    return parsed


def render(parsed: AnthropicParsed, messages: list[Message]) -> dict[str, Any]:
    rendered: dict[str, Any] = orjson.loads(WIRE.render(parsed, messages))
    return rendered


def test_the_view_pairs_tool_uses_and_results_and_pins_the_system() -> None:
    view = parse(session()).messages
    assert [m["role"] for m in view] == ["system", "user", "assistant", "tool", "user", "assistant", "tool"]
    assert view[2]["tool_calls"][0]["function"] == {"name": "read", "arguments": '{"path":"a.py"}'}
    assert view[3]["tool_call_id"] == "t1" and view[3]["content"] == "A" * 50
    assert view[4]["content"] == [text("note")]  # what the user said after the results
    assert view[2][WIRE_KEY][CARRIED] == "look"  # counted as the model reads it, never rewritten


def test_rendering_the_view_as_parsed_gives_the_body_back() -> None:
    parsed = parse(session())
    assert render(parsed, list(parsed.messages)) == session()


def test_a_rewritten_result_goes_back_into_its_user_message_in_order() -> None:
    parsed = parse(session())
    view = list(parsed.messages)
    view[3] = {**view[3], "content": "short"}
    sent = render(parsed, view)
    assert sent["messages"][2]["content"] == [result("t1", "short", cache_control=EPHEMERAL), text("note")]
    assert sent["messages"][:2] == session()["messages"][:2]


def test_a_breakpoint_is_not_in_the_view_so_a_message_reads_the_same_when_it_moves_and_goes_back_in_place() -> None:
    body = session()
    body["messages"][2]["content"][1] = text("note", cache_control=EPHEMERAL)
    parsed = parse(body)
    moved = parse(session())  # the same message, its breakpoint elsewhere (Claude Code's moves to the last message)
    assert parsed.messages[4] == moved.messages[4] == {**parsed.messages[4], "content": [text("note")]}
    view = list(parsed.messages)
    view[3] = {**view[3], "content": "short"}  # the result beside it rewritten: the message is rebuilt
    assert render(parsed, view)["messages"][2]["content"][1] == text("note", cache_control=EPHEMERAL)
    view[4] = {**view[4], "content": [text("a note")]}  # the text itself rewritten: its breakpoint stays on it
    assert render(parsed, view)["messages"][2]["content"][1] == text("a note", cache_control=EPHEMERAL)


def test_a_prompt_sent_as_a_block_with_a_breakpoint_then_as_a_string_reads_the_same() -> None:
    block = {"role": "user", "content": [text("Go on.", cache_control=EPHEMERAL)]}  # Claude Code, while it is last
    later = {"role": "user", "content": "Go on."}  # and on the requests after
    answered = [*session()["messages"], {"role": "assistant", "content": [text("Fixed.")]}]
    views = [parse({**session(), "messages": [*answered, m]}).messages[-1] for m in (block, later)]
    assert views[0] == views[1] and views[0]["content"] == "Go on."
    parsed = parse({**session(), "messages": [*answered, block]})
    assert render(parsed, list(parsed.messages))["messages"][-1] == block


def test_a_dropped_pair_takes_its_breakpoint_to_the_nearest_kept_block_before_it() -> None:
    parsed = parse(session())
    view = [m for m in parsed.messages if m.get("tool_call_id") != "t1"]
    view[2] = {k: v for k, v in view[2].items() if k != "tool_calls"}  # the call goes with its result
    sent = render(parsed, view)
    # t1's result held a breakpoint: the nearest kept block before it is the assistant's text.
    assert sent["messages"][1]["content"] == [thinking("look"), text("Reading.", cache_control=EPHEMERAL)]
    assert sent["messages"][2]["content"] == [text("note")]
    assert sent["messages"][3:] == session()["messages"][3:]


def test_a_breakpoint_never_lands_on_thinking_and_two_become_one_with_the_longer_ttl() -> None:
    body = session()
    body["messages"][0]["content"] = [text("Fix the bug.", cache_control=HOUR)]
    body["messages"][1]["content"] = [thinking("look"), use("t1", path="a.py")]
    parsed = parse(body)
    view = [m for m in parsed.messages if m.get("tool_call_id") != "t1"]
    view = [m for m in view if not (m.get("role") == "assistant" and m["tool_calls"][0]["id"] == "t1")]
    sent = render(parsed, view)
    # The assistant turn left with only its thinking goes; t1's breakpoint lands on the task, which keeps its 1h.
    assert sent["messages"][0] == {"role": "user", "content": [text("Fix the bug.", cache_control=HOUR), text("note")]}
    assert sum(str(m).count("cache_control") for m in sent["messages"]) + 1 <= 4


def test_more_than_four_breakpoints_lose_the_earliest_of_the_messages() -> None:
    body = session()
    body["messages"][0]["content"] = [text(f"part {i}", cache_control=EPHEMERAL) for i in range(4)]
    parsed = parse(body)
    view = list(parsed.messages)
    view[-1] = {**view[-1], "content": "short"}
    sent = render(parsed, view)
    markers = [
        (i, k) for i, m in enumerate(sent["messages"]) for k, b in enumerate(m["content"]) if "cache_control" in b
    ]
    assert len(markers) + 1 == 4  # with system[1]'s
    assert markers[-1] == (4, 0)  # the last message keeps its own


def test_the_latest_assistant_turn_is_kept_whole() -> None:
    parsed = parse(session())
    view = [m for m in parsed.messages if m.get("tool_call_id") != "t2"]
    view[-1] = {**view[-1], "tool_calls": [], "content": []}  # a strategy stripped the latest turn
    sent = render(parsed, view)
    assert sent["messages"][-2:] == session()["messages"][-2:]


def test_the_turn_holding_the_latest_server_compaction_is_kept_whole() -> None:
    # compact_20260112: the server reads everything before the latest compaction block from that block alone.
    body = session()
    summary = {"type": "compaction", "content": "The user asked to fix a bug; a.py was read."}
    body["messages"][1]["content"] = [summary, *body["messages"][1]["content"]]
    body["context_management"] = {"edits": [{"type": "compact_20260112"}]}
    parsed = parse(body)
    view = [
        m
        for m in parsed.messages
        if m.get("tool_call_id") != "t1" and not m.get("tool_calls", [{}])[0].get("id") == "t1"
    ]
    assert len(view) == len(parsed.messages) - 2  # a strategy dropped the t1 pair
    sent = render(parsed, WIRE.settle(parsed, view))
    assert sent["messages"][1] == body["messages"][1]  # back, whole, with its result
    assert sent["messages"][2]["content"][0] == body["messages"][2]["content"][0]
    assert sent["context_management"] == body["context_management"]
    assert messages_problems(body, sent) == []
    assert messages_problems(body, render(parsed, view)) == []  # render settles too


def test_unknown_blocks_and_fields_pass_untouched() -> None:
    body = session()
    future = {"type": "x_future", "payload": [1, {"a": None}]}
    body["messages"][2]["content"].append(future)
    body["messages"][2]["x_field"] = "kept"
    body["x_top"] = {"nested": True}
    parsed = parse(body)
    view = list(parsed.messages)
    view[3] = {**view[3], "content": "short"}
    sent = render(parsed, view)
    assert sent["messages"][2]["content"][-1] == future and sent["messages"][2]["x_field"] == "kept"
    assert sent["x_top"] == {"nested": True}


def test_tool_definitions_and_thinking_are_counted() -> None:
    body = {**session(), "tools": [{"name": "read", "description": "Read a file.", "input_schema": {"type": "object"}}]}
    parsed = parse(body)
    counter = TokenCounter()
    assert counter.count_tools(parsed.request["tools"], "claude-sonnet-4-5") > 0
    with_thinking = counter.count_message(parsed.messages[2], "claude-sonnet-4-5")
    view = parsed.messages[2]
    without = counter.count_message(
        {**view, WIRE_KEY: {k: v for k, v in view[WIRE_KEY].items() if k != CARRIED}}, "claude-sonnet-4-5"
    )
    assert with_thinking > without


def test_the_context_1m_beta_asks_for_the_extended_window() -> None:
    betas = AnthropicMessages().for_request({"anthropic-beta": "claude-code-20250219, context-1m-2025-08-07"})
    assert betas.parse(orjson.dumps(session()), 64).extended_context
    assert not WIRE.parse(orjson.dumps(session()), 64).extended_context


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [{"role": "user", "content": 5}]},
        {"messages": [{"role": "user", "content": ["bare string block"]}]},
        {"messages": [{"role": "user", "content": [{"type": 7}]}]},
        {"messages": ["not an object"]},
        {"messages": [], "system": [{"no": "type"}]},
    ],
)
def test_malformed_bodies_are_refused(body: dict[str, Any]) -> None:
    with pytest.raises(ApiError) as raised:
        WIRE.parse(orjson.dumps(body), 64)
    assert raised.value.status == 400


def test_a_broken_stream_ends_with_anthropics_error_event() -> None:
    event = WIRE.stream_error_event("gone", "upstream_broken_stream")
    assert event.startswith(b"event: error\ndata: ") and event.endswith(b"\n\n")
    assert orjson.loads(event.split(b"data: ", 1)[1]) == {
        "type": "error",
        "error": {"type": "api_error", "message": "gone"},
    }


def test_fifty_thousand_blocks_each_with_a_breakpoint_go_out_with_four() -> None:
    # A client controls how many blocks and markers it sends: every step is linear in them, and what goes is valid.
    body = session()
    body["messages"][2]["content"] = [
        result("t1", "A" * 50),
        *(text(f"{i}", cache_control=EPHEMERAL) for i in range(50_000)),
    ]
    parsed = parse(body)
    view = list(parsed.messages)
    view[3] = {**view[3], "content": "short"}
    sent = render(parsed, view)
    in_system = sum("cache_control" in b for b in sent["system"])
    markers = sum("cache_control" in b for m in sent["messages"] for b in m["content"])
    assert (in_system, markers) == (1, 3) and len(sent["messages"][2]["content"]) == 50_001  # the API's limit, 4
