"""app.wire.Responses: Responses bodies to the strategies' messages and back. Examples, then design.md's invariants in
Responses form over generated bodies and random chains of the registered strategies: no call or output orphaned,
opaque and untouched items forwarded identical, pinned items kept in order, the input never changed, the same
output for the same input.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.edge.errors import ApiError
from app.wire import Responses
from app.wire.responses import CALLS, OUTPUTS, ResponsesParsed
from strategies import BUILTINS, Chain, Context, Registry, TokenCounter, format_chain
from strategies.conversation import with_message_text
from strategies.messages import WIRE_KEY
from tests.factories import custom_call, custom_output, function_call, function_output, item_message, reasoning
from tests.strategies.generators import characters, long_texts, steps

WIRE = Responses()
REGISTRY = Registry(BUILTINS)
COUNTER = TokenCounter()  # its caches only save time; shared, as a proxy process shares one
REWRITABLE = {"content", "output", "arguments", "input"}  # the only fields a rebuilt item may differ in
PINNED_TYPES = {"additional_tools", "item_reference", "configuration_update", "future_item", 7}


def parse(body: dict[str, Any]) -> ResponsesParsed:
    parsed = WIRE.parse(orjson.dumps(body), 64)
    assert isinstance(parsed, ResponsesParsed)
    return parsed


def test_items_become_chat_messages() -> None:
    body = {
        "instructions": "Be terse.",
        "input": [
            item_message("user", "Fix it."),
            reasoning(0),
            item_message("assistant", "Looking."),
            function_call(0),
            custom_call(1),
            function_output(0, 10),
            custom_output(1, 10),
        ],
        "tools": [{"type": "function", "name": "read_file", "parameters": {"type": "object"}}],
        "max_output_tokens": 500,
    }
    parsed = parse(body)
    view = [{k: v for k, v in m.items() if k != WIRE_KEY} for m in parsed.messages]
    assert view[0] == {"role": "system", "content": "Be terse."}
    assert view[1] == {"role": "user", "content": [{"type": "text", "text": "Fix it."}]}
    assert view[2]["role"] == "assistant" and view[2]["content"] == [{"type": "text", "text": "Looking."}]
    assert [c["id"] for c in view[2]["tool_calls"]] == ["call_0", "call_1"]  # the message and both calls: one turn
    assert view[2]["tool_calls"][1]["function"]["arguments"] == custom_call(1)["input"]
    assert [m["tool_call_id"] for m in view[3:]] == ["call_0", "call_1"]
    assert parsed.messages[2][WIRE_KEY]["items"] == [1, 2, 3, 4]  # the reasoning rides with its turn
    assert parsed.messages[2][WIRE_KEY]["tokens"] > 0  # and costs what its JSON suggests
    assert parsed.request["tools"] == [
        {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}
    ]
    assert parsed.request["max_completion_tokens"] == 500


def test_what_the_view_cannot_pair_is_pinned_as_it_came() -> None:
    items = [
        {"type": "additional_tools", "role": "developer", "tools": []},
        {"type": "tool_search_output", "call_id": "ts_1", "tools": [{"type": "function", "name": "found"}]},
        {"type": "function_call_output", "call_id": "call_from_before", "output": "answers previous_response_id"},
        {"type": "future_item", "payload": [1, 2]},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "caller": {"type": "program"}},
        {"type": "message", "role": "critic", "content": "unknown role"},
        {"type": "compaction", "encrypted_content": "older"},
        {"type": "compaction", "encrypted_content": "latest"},
    ]
    parsed = parse({"input": items})
    pinned = [m for m in parsed.messages if m["role"] == "developer"]
    assert [m[WIRE_KEY]["items"] for m in pinned] == [[0], [1], [2], [3], [4], [5], [6, 7]]  # older compaction rides


def test_a_changed_message_is_rebuilt_from_its_items() -> None:
    items = [item_message("user", "Fix it."), reasoning(0), custom_call(0), custom_output(0, 50)]
    parsed = parse({"input": items})
    shortened = [*parsed.messages[:-1], with_message_text(parsed.messages[-1], "[cut]")]
    sent = orjson.loads(WIRE.render(parsed, shortened))["input"]
    assert sent[:3] == items[:3]
    assert sent[3] == {**items[3], "output": [{"type": "input_text", "text": "[cut]"}, *items[3]["output"][2:]]}


def test_a_message_a_strategy_made_becomes_a_message_item() -> None:
    parsed = parse({"input": "hi"})
    notes = {"role": "user", "content": "Notes on the earlier conversation: none."}
    sent = orjson.loads(WIRE.render(parsed, [notes, *parsed.messages]))["input"]
    assert sent == [{"type": "message", "role": "user", "content": notes["content"]}, {"role": "user", "content": "hi"}]


@pytest.mark.parametrize("body", [{"input": 5}, {"input": [None]}, {"input": "x", "stream": 1}])
def test_bodies_the_proxy_cannot_read_are_refused(body: dict[str, Any]) -> None:
    with pytest.raises(ApiError) as raised:
        parse(body)
    assert raised.value.status == 400


def test_an_error_event_is_one_the_sdk_raises_on() -> None:
    event = WIRE.stream_error_event("gone", "upstream_broken_stream")
    name, data = event.decode().removesuffix("\n\n").split("\n")
    assert name == "event: error"
    payload = json.loads(data.removeprefix("data: "))
    assert payload["type"] == "error" and payload["error"]["code"] == "upstream_broken_stream"


# --- Invariants over generated bodies ---------------------------------------------------------------------------

words = st.text(characters, max_size=20)


@st.composite
def responses_bodies(draw: st.DrawFn) -> dict[str, Any]:
    """Bodies with every kind of item the wire knows and some it does not, every item with an id of its own."""
    serial = iter(range(10_000))
    items: list[dict[str, Any]] = []

    def add(item: dict[str, Any]) -> None:
        items.append({**item, "id": f"it_{next(serial)}"})

    def text_message(role: str) -> dict[str, Any]:
        text = draw(words)
        return {"role": role, "content": text} if draw(st.booleans()) else item_message(role, text)

    if draw(st.booleans()):
        add({"type": "additional_tools", "role": "developer", "tools": [{"type": "custom", "name": "exec"}]})
    add(text_message("developer"))
    add(text_message("user"))
    calls = 0
    for kind in draw(st.lists(st.sampled_from(["user", "reply", "turn", "turn", "turn", "odd"]), max_size=10)):
        if kind == "user":
            add(text_message("user"))
        elif kind == "reply":
            if draw(st.booleans()):
                add(reasoning(calls))
            add(item_message("assistant", draw(words) or "ok"))
        elif kind == "turn":
            add(reasoning(calls)) if draw(st.booleans()) else None
            if draw(st.booleans()):
                add({"type": "web_search_call", "status": "completed", "action": {"query": draw(words)}})
            if draw(st.booleans()):
                add(item_message("assistant", draw(words) or "on it"))
            ids = list(range(calls, calls + draw(st.integers(1, 3))))
            calls += len(ids)
            shell = draw(st.booleans())
            for i in ids:
                if shell and i == ids[-1]:
                    add({"type": "shell_call", "call_id": f"call_{i}", "action": {"commands": ["ls"]}})
                else:
                    call = function_call(i) if draw(st.booleans()) else custom_call(i)
                    add({**call, "arguments": draw(long_texts())} if call["type"] == "function_call" else call)
            for i in ids:
                if shell and i == ids[-1]:
                    add({"type": "shell_call_output", "call_id": f"call_{i}", "output": [{"stdout": draw(words)}]})
                elif draw(st.booleans()):
                    add({"type": "function_call_output", "call_id": f"call_{i}", "output": draw(long_texts())})
                else:
                    add({**custom_output(i, 0), "output": [{"type": "input_text", "text": draw(long_texts())}]})
        else:
            add(
                draw(
                    st.sampled_from(
                        [
                            {"type": "future_item", "payload": {"x": [1, None]}},
                            {"type": "function_call_output", "call_id": "call_elsewhere", "output": "earlier"},
                            {"type": "compaction", "encrypted_content": "Y21w" * 20},
                            {"type": "item_reference"},
                            # Shapes a hostile client sends: the API would refuse them, the proxy forwards them.
                            {"type": "message", "role": ["user"], "content": {"text": "x"}},
                            {"type": 7, "call_id": {"nested": True}},
                            {"type": "function_call", "call_id": None, "arguments": 5},
                            {"type": "function_call_output", "call_id": ["call_0"], "output": {"big": "x"}},
                        ]
                    )
                )
            )
    if draw(st.booleans()):
        add(text_message("user"))
    body: dict[str, Any] = {"model": "gpt-4o", "input": items, "store": False}
    if draw(st.booleans()):
        body["instructions"] = draw(words)
    return body


chains = st.lists(steps, min_size=1, max_size=3).map(lambda specs: Chain.parse(format_chain(specs), REGISTRY))


def compact(body: dict[str, Any], chain: Chain, counter: TokenCounter) -> tuple[dict[str, Any], ResponsesParsed]:
    raw = orjson.dumps(body)
    parsed = parse(body)
    result = chain.run(parsed.messages, Context(model="gpt-4o", tokens=counter, request=parsed.request))
    unchanged = len(result.messages) == len(parsed.messages) and all(
        a is b for a, b in zip(result.messages, parsed.messages, strict=True)
    )
    return orjson.loads(raw if unchanged else WIRE.render(parsed, result.messages)), parsed


def calls_answered(items: list[dict[str, Any]]) -> tuple[set[str], set[str]]:
    calls = {i["call_id"] for i in items if str(i.get("type")).endswith("_call") and isinstance(i.get("call_id"), str)}
    answered = {
        i["call_id"] for i in items if str(i.get("type")).endswith("_call_output") and isinstance(i.get("call_id"), str)
    }
    return calls, answered


examples = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@examples
@given(responses_bodies(), chains)
def test_compaction_keeps_the_invariants_in_responses_form(body: dict[str, Any], chain: Chain) -> None:
    snapshot = copy.deepcopy(body)
    out, parsed = compact(body, chain, COUNTER)
    assert body == snapshot  # the input is untouched
    assert {k: v for k, v in out.items() if k not in ("input", "instructions")} == {
        k: v for k, v in body.items() if k not in ("input", "instructions")
    }
    assert out.get("instructions") == body.get("instructions")
    original = {item["id"]: (index, item) for index, item in enumerate(body["input"])}
    sent = out["input"]
    positions = [original[item["id"]][0] for item in sent]
    assert positions == sorted(set(positions))  # nothing repeated, nothing reordered

    # Untouched and opaque items identical; a rebuilt one differs only in the text a strategy may shorten.
    for item in sent:
        before = original[item["id"]][1]
        if item != before:
            assert before.get("type") in ("message", "function_call", "custom_tool_call", None) or before.get(
                "type", ""
            ).endswith("_output"), before
            assert {k for k in item if item.get(k) != before.get(k)} <= REWRITABLE

    # No call or output orphaned: a pair the input had is sent whole or not at all.
    calls, answered = calls_answered(body["input"])
    sent_calls, sent_answered = calls_answered(sent)
    for call_id in calls & answered:
        assert (call_id in sent_calls) == (call_id in sent_answered), call_id

    # Pinned: instructions-like items, what the view cannot pair, the latest compaction item, the first and last user.
    compactions = [i for i in body["input"] if i.get("type") == "compaction"]
    users = [i for i in body["input"] if i.get("role") == "user"]
    pinned = [
        i
        for i in body["input"]
        if i.get("role") in ("system", "developer")
        or i.get("type") in PINNED_TYPES
        or not isinstance(i.get("role", ""), str)
        or (i.get("type") in CALLS and not isinstance(i.get("call_id"), str))
        or (i.get("type") in OUTPUTS and (not isinstance(i.get("call_id"), str) or i["call_id"] not in calls))
        or (compactions and i is compactions[-1])
        or (users and (i is users[0] or i is users[-1]))
    ]
    assert [i for i in sent if i in pinned] == pinned

    # A reasoning item goes out right before an item of its own turn.
    turn_of = {index: n for n, m in enumerate(parsed.messages) for index in m[WIRE_KEY].get("items", ())}
    for k, item in enumerate(sent):
        if item.get("type") == "reasoning" and k + 1 < len(sent):
            here, after = original[item["id"]][0], original[sent[k + 1]["id"]][0]
            assert (
                turn_of[here] == turn_of[after]
                or after == here + 1
                or not any(original[i["id"]][0] in range(here + 1, after) for i in sent)
            )

    assert compact(copy.deepcopy(body), chain, COUNTER)[0] == out  # deterministic


@examples
@given(responses_bodies())
def test_messages_nothing_changed_render_as_their_items(body: dict[str, Any]) -> None:
    parsed = parse(body)
    assert orjson.loads(WIRE.render(parsed, parsed.messages))["input"] == body["input"]
    copies = [dict(m) for m in parsed.messages]  # changed by identity, equal in content: rebuilt the same
    assert orjson.loads(WIRE.render(parsed, copies))["input"] == body["input"]
