"""wire.anthropic.expand: the tool offered in a Messages body, a whole answer read and the one the client gets."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from app.wire import AnthropicMessages
from app.wire.anthropic.expand import TOOL, Answer, MessagesExpandTool, add_usage
from strategies.refs import EXPAND_TOOL
from tests.support.scripted_messages import text, thinking, use

TOOLS = [{"name": "read", "input_schema": {"type": "object"}}]


def offered(**body: Any) -> dict[str, Any] | None:
    raw = orjson.dumps({"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}], **body})
    result = MessagesExpandTool().offer(AnthropicMessages().parse(raw, 64))
    return result.body if result is not None else None


@pytest.mark.parametrize("choice", [None, {"type": "any"}, {"type": "none"}, {"type": "tool", "name": "read"}])
def test_the_tool_goes_after_the_clients_own_and_tool_choice_as_sent(choice: Any) -> None:
    body = offered(tools=TOOLS, **({"tool_choice": choice} if choice else {}))
    assert body is not None and body["tools"] == [*TOOLS, TOOL] and body.get("tool_choice") == choice
    assert TOOL == {"name": EXPAND_TOOL, "description": TOOL["description"], "input_schema": TOOL["input_schema"]}


def test_not_offered_beside_a_client_tool_of_its_name_or_a_choice_naming_it() -> None:
    assert offered(tools=[*TOOLS, {"name": EXPAND_TOOL, "input_schema": {}}]) is None
    assert offered(tool_choice={"type": "tool", "name": EXPAND_TOOL}) is None
    assert offered(tools="no list") is None
    assert offered() == {**offered(), "tools": [TOOL]}  # type: ignore[dict-item]


def test_the_client_gets_every_rounds_blocks_but_the_calls_and_one_id() -> None:
    first = Answer(
        {"id": "msg_1", "content": [thinking("Model: a."), use("t1", EXPAND_TOOL)], "stop_reason": "tool_use"}
    )
    assert first.expand_calls() == [("t1", "{}")] and not first.other_calls()
    last = MessagesExpandTool().answer({"id": "msg_2", "content": [text("Done.")], "stop_reason": "end_turn"}, first)
    body = last.for_client({"input_tokens": 2})
    assert body["content"] == [thinking("Model: a."), text("Done.")] and body["id"] == "msg_1"
    assert body["usage"] == {"input_tokens": 2}
    capped = Answer({"content": [use("t2", EXPAND_TOOL)], "stop_reason": "tool_use"}).for_client(None)
    assert capped["content"] == [] and capped["stop_reason"] == "end_turn"


def test_usage_adds_up_and_a_null_count_is_none() -> None:
    one = {"input_tokens": 5, "cache_creation_input_tokens": None, "output_tokens": 2, "service_tier": "standard"}
    two = {
        "input_tokens": 7,
        "cache_creation_input_tokens": 3,
        "output_tokens": 1,
        "service_tier": "priority",
        "server_tool_use": {"web_search_requests": 1},
    }
    assert add_usage(add_usage(None, one), two) == {
        "input_tokens": 12,
        "cache_creation_input_tokens": 3,
        "output_tokens": 3,
        "service_tier": "standard",
        "server_tool_use": {"web_search_requests": 1},
    }
