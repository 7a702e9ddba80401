"""The expand tool on Anthropic's Messages API end to end: the anthropic SDK through the proxy to a scripted model on
loopback (tests.support.scripted_messages) that calls it when it sees a stub and answers from the original.

The model signs its thinking, and remembers every turn it wrote: each request it is sent must hold its turns exactly
as it wrote them (ScriptedMessages.foreign_turns), tool uses and results paired, at most 4 breakpoints.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import orjson
import pytest

from app import Settings, create_app
from bench.compaction.wire_forms import messages_body
from strategies.refs import EXPAND_DESCRIPTION, EXPAND_PARAMETERS, EXPAND_TOOL, refs_in
from tests.factories import agent_loop, output
from tests.support.metrics import scrape
from tests.support.scripted_messages import Reply, ScriptedMessages, redacted, text, thinking, use
from tests.support.servers import LoopbackServer

HEADERS = {"X-Compaction-Strategies": "mask(keep=1,epoch=0,min_gain=0)"}
IN_EPOCHS = {"X-Compaction-Strategies": "mask(keep=1,epoch=2,min_gain=0)"}
TOOLS = [{"name": "read", "description": "Read a file.", "input_schema": {"type": "object", "properties": {}}}]
EXPAND = {"name": EXPAND_TOOL, "description": EXPAND_DESCRIPTION, "input_schema": EXPAND_PARAMETERS}
FIRST_LINE = output(0, 2000).splitlines()[0]
LOOKING = [thinking("Model: the oldest output is a stub; I need it."), text("Let me look.")]


def conversation(**fields: Any) -> dict[str, Any]:
    """A Claude Code session of six reads of 2,000 chars (mask(keep=1) stubs five), thinking on."""
    body: dict[str, Any] = json.loads(messages_body(agent_loop(6, 2000), {"model": "claude-sonnet-4-5"}))
    return {**body, "tools": TOOLS, "thinking": {"type": "enabled", "budget_tokens": 2048}, **fields}


def offered(payload: dict[str, Any]) -> bool:
    """Whether the model may call the expand tool: it is offered, and tool_choice lets it call tools."""
    choice = payload.get("tool_choice") or {}
    tools = payload.get("tools") or []
    return choice.get("type") != "none" and any(t.get("name") == EXPAND_TOOL for t in tools)


def blocks(payload: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [b for m in payload["messages"] if isinstance(m["content"], list) for b in m["content"] if b["type"] == kind]


def oldest_stub(payload: dict[str, Any]) -> str | None:
    found = [r for b in blocks(payload, "tool_result") for r in refs_in(str(b.get("content")))]
    return found[0] if found else None


def expanded(payload: dict[str, Any]) -> set[str]:
    return {b["input"].get("ref") for b in blocks(payload, "tool_use") if b["name"] == EXPAND_TOOL}


def expand_result(payload: dict[str, Any]) -> str | None:
    """The content of the proxy's result, when the last message answers the model's expand call."""
    last = payload["messages"][-1]["content"]
    found = [b for b in last if isinstance(last, list) and b.get("tool_use_id", "").startswith("toolu_x")]
    return str(found[0]["content"]) if found else None


def reader(payload: dict[str, Any]) -> Reply:
    """A model that needs the oldest tool output: it expands its stub unless it has read it already, then quotes it."""
    result = expand_result(payload)
    if result is not None:
        return Reply([thinking("Model: there it is."), text("Found: " + result.splitlines()[0])])
    ref = oldest_stub(payload)
    if ref is not None and offered(payload) and ref not in expanded(payload):
        return Reply([*LOOKING, use("toolu_x1", EXPAND_TOOL, ref=ref)])
    return Reply([thinking("Model: nothing more to read."), text("Done.")])


@pytest.fixture
def model() -> Iterator[ScriptedMessages]:
    scripted = ScriptedMessages(reader)
    with LoopbackServer(scripted.app) as server:
        scripted.url = server.url  # type: ignore[attr-defined]
        yield scripted


def proxy_for(model: ScriptedMessages, **overrides: Any) -> LoopbackServer:
    settings = Settings(anthropic_base_url=model.url, **overrides)  # type: ignore[attr-defined]
    return LoopbackServer(create_app(settings), settings)


@pytest.fixture
def proxy(model: ScriptedMessages) -> Iterator[LoopbackServer]:
    with proxy_for(model) as server:
        yield server


def sdk(proxy: LoopbackServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test", max_retries=0)


def valid(model: ScriptedMessages) -> None:
    """Every request the model got is one the API takes: its own turns as it wrote them, every tool use answered in
    the next message and every result answering one, turns alternating, at most 4 breakpoints.
    """
    for payload in model.received:
        assert model.foreign_turns(payload) == []
        uses: set[str] = set()
        for index, message in enumerate(payload["messages"]):
            content = message["content"] if isinstance(message["content"], list) else []
            results = {b["tool_use_id"] for b in content if b["type"] == "tool_result"}
            assert results == (uses if message["role"] == "user" else set()), index
            uses = {b["id"] for b in content if b["type"] == "tool_use"} if message["role"] == "assistant" else set()
            assert index == 0 or payload["messages"][index - 1]["role"] != message["role"], index
        assert len(breakpoints(payload)) <= 4


def breakpoints(payload: dict[str, Any]) -> list[tuple[Any, int]]:
    """Where the request's cache_control markers are: (message index, or "system"; block index)."""
    groups = [("system", payload.get("system")), *enumerate(m["content"] for m in payload["messages"])]
    return [
        (where, k)
        for where, group in groups
        if isinstance(group, list)
        for k, b in enumerate(group)
        if "cache_control" in b
    ]


def test_a_whole_answer_comes_after_the_round_with_the_original_and_summed_usage(
    model: ScriptedMessages, proxy: LoopbackServer
) -> None:
    raw = sdk(proxy).messages.with_raw_response.create(**conversation(), extra_headers=HEADERS)
    answer = raw.parse()
    assert [b.type for b in answer.content] == ["thinking", "text", "thinking", "text"]
    assert answer.content[-1].text == f"Found: {FIRST_LINE}"  # type: ignore[union-attr]
    assert answer.stop_reason == "end_turn" and answer.id == "msg_0001"
    usage = answer.usage
    assert (usage.input_tokens, usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (200, 60, 80)
    assert usage.output_tokens == 20
    assert raw.headers["x-compaction-expansions"] == "1" and "x-compaction-fallback" not in raw.headers
    first, second = model.received
    assert first["tools"] == [*TOOLS, EXPAND] and second["tools"] == first["tools"]
    # The second request is the first, then the model's turn as it wrote it, then the original in a user turn.
    assert second["messages"][:-2] == first["messages"]
    turn, results = second["messages"][-2:]
    assert orjson.dumps(turn["content"]) == model.written[0]  # signed thinking, text and the call, byte for byte
    assert results == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_x1", "content": output(0, 2000)}],
    }
    sent = [orjson.dumps(b) for b in blocks(first, "thinking")]
    assert sent == [orjson.dumps(b) for b in blocks(conversation(), "thinking")]  # the client's, as they came
    assert breakpoints(first) == breakpoints(conversation()) == [("system", 0), (12, 0)]  # where the client put them
    valid(model)


def test_a_stream_runs_on_in_one_message_without_the_internal_call(
    model: ScriptedMessages, proxy: LoopbackServer
) -> None:
    with sdk(proxy).messages.stream(**conversation(), extra_headers=HEADERS) as stream:
        events = list(stream)
        final = stream.get_final_message()
    kinds = [e.type for e in events]
    assert kinds.count("message_start") == 1 and kinds.count("message_stop") == 1
    assert [e.type for e in events if e.type.startswith("message")].count("message_delta") == 1
    starts = [e for e in events if e.type == "content_block_start"]
    assert [e.index for e in starts] == [0, 1, 2, 3]  # numbered on through the rounds, without a gap
    assert all(e.content_block.type != "tool_use" for e in starts)
    assert [b.type for b in final.content] == ["thinking", "text", "thinking", "text"]
    assert final.content[1].text + final.content[3].text == f"Let me look.Found: {FIRST_LINE}"  # type: ignore[union-attr]
    assert final.content[0].signature == LOOKING[0]["signature"]  # type: ignore[union-attr]
    assert final.stop_reason == "end_turn" and final.id == "msg_0001"
    usage = final.usage
    assert (usage.input_tokens, usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (200, 60, 80)
    assert usage.output_tokens == 20
    assert len(model.received) == 2 and orjson.dumps(model.received[1]["messages"][-2]["content"]) == model.written[0]
    assert model.received[1]["messages"][-1]["content"][0]["content"] == output(0, 2000)  # the original
    valid(model)


def test_a_round_the_client_may_see_streams_as_it_comes(model: ScriptedMessages, proxy: LoopbackServer) -> None:
    model.hold = threading.Event()  # the first round's stream stops before its end
    with sdk(proxy).messages.stream(**conversation(), extra_headers=HEADERS) as stream:
        for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                break
        # Its thinking and text reached the client while the round is still running upstream.
        assert stream.current_message_snapshot.content[1].text  # type: ignore[union-attr]
        assert len(model.received) == 1
        model.hold.set()
        final = stream.get_final_message()
    assert final.content[-1].text == f"Found: {FIRST_LINE}"  # type: ignore[union-attr]


def next_turn(body: dict[str, Any], content: list[dict[str, Any]], question: str) -> dict[str, Any]:
    """The client's next request as Claude Code sends it: its answer as it got it, a new question, the breakpoint
    moved from the last message to the new one.
    """
    messages = [dict(m) for m in body["messages"]]
    last = messages[-1]
    last["content"] = [{k: v for k, v in b.items() if k != "cache_control"} for b in last["content"]]
    return {**body, "messages": [*messages, {"role": "assistant", "content": content}, asked(question)]}


def without_breakpoints(messages: list[dict[str, Any]]) -> list[Any]:
    return [
        {**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
        if isinstance(m["content"], list)
        else m
        for m in messages
    ]


def asked(question: str) -> dict[str, Any]:
    """A prompt as Claude Code sends it, the breakpoint on it while it is the last message."""
    return {"role": "user", "content": [{"type": "text", "text": question, "cache_control": {"type": "ephemeral"}}]}


@pytest.mark.parametrize(
    ("stream", "prompted"), [(False, False), (True, False), (False, True)], ids=["whole", "stream", "after-a-prompt"]
)
def test_the_next_turn_shows_the_round_again_with_its_thinking_in_place(
    model: ScriptedMessages, proxy: LoopbackServer, stream: bool, prompted: bool
) -> None:
    client = sdk(proxy)
    first = conversation()
    if prompted:  # the round follows a prompt whose breakpoint has moved on by the next turn
        messages = next_turn(first, [text("All read.")], "What did the first read say?")["messages"]
        first = {**first, "messages": messages}
    if stream:
        with client.messages.stream(**first, extra_headers=IN_EPOCHS) as streamed:
            content = streamed.get_final_message().model_dump(exclude_none=True)["content"]
    else:
        content = client.messages.with_raw_response.create(**first, extra_headers=IN_EPOCHS).http_response.json()[
            "content"
        ]
    second = next_turn(first, content, "Thanks. Now finish the fix.")
    final = client.messages.create(**second, extra_headers=IN_EPOCHS)
    assert final.content[-1].text == "Done."  # type: ignore[union-attr]
    assert len(model.received) == 3  # two for the first turn, one for the second: no second expansion
    round_two, turn_two = model.received[1]["messages"], model.received[2]["messages"]
    # The second turn extends, turn for turn, the request the model saw with the round in it: the round with its
    # thinking before its call, then the client's answer holding what the model wrote after the result.
    assert without_breakpoints(turn_two[: len(round_two)]) == without_breakpoints(round_two)
    assert turn_two[len(round_two)]["content"] == orjson.loads(model.written[1])  # the client's copy of it
    assert turn_two[len(round_two) + 1]["content"][0]["text"] == "Thanks. Now finish the fix."
    # Its breakpoints where the client put them: the system's and its new question's, none on the proxy's turns.
    assert breakpoints(model.received[2]) == [("system", 0), (len(turn_two) - 1, 0)]
    valid(model)


def test_redacted_and_interleaved_thinking_go_back_as_written_round_after_round(
    model: ScriptedMessages, proxy: LoopbackServer
) -> None:
    def interleaved(payload: dict[str, Any]) -> Reply:
        result = expand_result(payload)
        if result is not None and len(expanded(payload)) == 1:  # think between the calls, then call again
            return Reply([thinking("Model: now the second one."), use("toolu_x2", EXPAND_TOOL, ref=stubs(payload)[1])])
        if result is not None:
            return Reply([redacted("c2VjcmV0"), thinking("Model: both read."), text("Both found.")])
        head = [redacted("b3BhcXVl"), *LOOKING]
        return Reply([*head, use("toolu_x1", EXPAND_TOOL, ref=stubs(payload)[0])])

    model.script = interleaved
    body = conversation()
    epochs = {"X-Compaction-Strategies": "mask(keep=1,epoch=3,min_gain=0)"}  # two rounds move no boundary
    with sdk(proxy).messages.stream(**body, extra_headers=epochs) as streamed:
        final = streamed.get_final_message()
    content = final.model_dump(exclude_none=True)["content"]
    assert [b["type"] for b in content] == [
        "redacted_thinking",
        "thinking",
        "text",
        "thinking",
        "redacted_thinking",
        "thinking",
        "text",
    ]
    third = model.received[2]["messages"]
    assert [orjson.dumps(m["content"]) for m in third[-4::2]] == model.written[:2]
    model.script = reader
    sdk(proxy).messages.create(**next_turn(body, content, "Go on."), extra_headers=epochs)
    assert len(model.received) == 4
    later = model.received[3]["messages"]
    assert without_breakpoints(later[: len(third)]) == without_breakpoints(third)
    assert later[len(third)]["content"] == orjson.loads(model.written[2])
    valid(model)


def stubs(payload: dict[str, Any]) -> list[str]:
    return [r for b in blocks(payload, "tool_result") for r in refs_in(str(b.get("content")))]


def reading(payload: dict[str, Any]) -> Reply:
    """A model that reads the oldest output with the expand tool when it may call it, then calls the client's tool."""
    if (
        expand_result(payload) is not None
        or not offered(payload)
        or payload.get("tool_choice", {}).get("type") == "tool"
    ):
        return Reply([thinking("Model: on to the file."), use("toolu_r1", "read")])
    return Reply([*LOOKING, use("toolu_x1", EXPAND_TOOL, ref=oldest_stub(payload))])


@pytest.mark.parametrize(
    ("choice", "requests"),
    [
        # The expand call is the tool it must use; the client still gets a call of its own.
        ({"type": "any"}, 2),
        ({"type": "any", "disable_parallel_tool_use": True}, 2),
        ({"type": "auto", "disable_parallel_tool_use": True}, 2),
        ({"type": "tool", "name": "read"}, 1),  # forced to the client's tool: the model cannot call the expand tool
    ],
    ids=["any", "any-one-call", "auto-one-call", "forced"],
)
def test_tool_choice_goes_as_sent_and_the_client_gets_its_own_call(
    model: ScriptedMessages, proxy: LoopbackServer, choice: dict[str, Any], requests: int
) -> None:
    model.script = reading
    answer = sdk(proxy).messages.create(**conversation(tool_choice=choice), extra_headers=HEADERS)
    assert [b.type for b in answer.content][-1] == "tool_use" and answer.content[-1].name == "read"  # type: ignore[union-attr]
    assert answer.stop_reason == "tool_use"
    assert len(model.received) == requests
    assert all(p["tool_choice"] == choice and p["tools"] == [*TOOLS, EXPAND] for p in model.received)
    valid(model)


def test_tool_choice_none_is_offered_the_same_tool_and_answers_in_text(
    model: ScriptedMessages, proxy: LoopbackServer
) -> None:
    answer = sdk(proxy).messages.create(**conversation(tool_choice={"type": "none"}), extra_headers=HEADERS)
    assert answer.content[-1].text == "Done." and len(model.received) == 1  # type: ignore[union-attr]
    assert model.received[0]["tools"] == [*TOOLS, EXPAND] and model.received[0]["tool_choice"] == {"type": "none"}


@pytest.mark.parametrize(
    "fields",
    [
        {"tools": [*TOOLS, {**EXPAND, "description": "The client's own."}]},  # its calls are the client's
        {"tool_choice": {"type": "tool", "name": EXPAND_TOOL}},  # forcing a tool it does not define: as it came
    ],
    ids=["own-tool", "forced-undefined"],
)
def test_where_the_tool_is_not_offered_mask_falls_back(
    model: ScriptedMessages, proxy: LoopbackServer, fields: dict[str, Any]
) -> None:
    model.script = lambda p: Reply([text("ok")])
    raw = sdk(proxy).messages.with_raw_response.create(**conversation(**fields), extra_headers=HEADERS)
    assert raw.headers["x-compaction-fallback"] == "not_expandable"
    sent = model.received[0]
    assert sent["tools"] == conversation(**fields)["tools"]
    assert not any(refs_in(str(b.get("content"))) for b in blocks(sent, "tool_result"))


def test_the_clients_own_tool_of_that_name_gets_its_calls(model: ScriptedMessages, proxy: LoopbackServer) -> None:
    model.script = lambda p: Reply([use("toolu_c1", EXPAND_TOOL, ref="0123456789")])
    own = {**EXPAND, "description": "The client's own."}
    answer = sdk(proxy).messages.create(**conversation(tools=[own]), extra_headers=HEADERS)
    assert answer.stop_reason == "tool_use" and answer.content[0].id == "toolu_c1"  # type: ignore[union-attr]
    assert len(model.received) == 1


def test_with_the_tool_switched_off_no_stub_names_it(model: ScriptedMessages) -> None:
    model.script = lambda p: Reply([text("ok")])
    with proxy_for(model, expand_max_rounds=0) as proxy:
        raw = sdk(proxy).messages.with_raw_response.create(**conversation(), extra_headers=HEADERS)
    assert raw.headers["x-compaction-fallback"] == "not_expandable"
    sent = model.received[0]
    assert sent["tools"] == TOOLS and EXPAND_TOOL not in json.dumps(sent["messages"])


def test_expand_calls_beside_the_clients_own_are_dropped_and_its_blocks_renumbered(
    model: ScriptedMessages, proxy: LoopbackServer
) -> None:
    model.script = lambda p: Reply([*LOOKING, use("toolu_x1", EXPAND_TOOL, ref="0123456789"), use("toolu_r", "read")])
    answer = sdk(proxy).messages.create(**conversation(), extra_headers=HEADERS)
    assert [b.type for b in answer.content] == ["thinking", "text", "tool_use"] and answer.stop_reason == "tool_use"
    with sdk(proxy).messages.stream(**conversation(), extra_headers=HEADERS) as stream:
        starts = [e for e in stream if e.type == "content_block_start"]
        final = stream.get_final_message()
    assert [e.index for e in starts] == [0, 1, 2] and final.content[2].name == "read"  # type: ignore[union-attr]
    assert len(model.received) == 2  # one request each: nothing internal


def always_expand(payload: dict[str, Any]) -> Reply:
    if offered(payload):
        return Reply([thinking("Model: again."), use(f"toolu_x{len(payload['messages'])}", EXPAND_TOOL, ref="0a")])
    return Reply([text("Giving up on it.")])


@pytest.mark.parametrize("stream", [False, True])
def test_past_the_round_cap_a_client_without_tools_gets_a_request_with_the_tool_it_may_not_call(
    model: ScriptedMessages, proxy: LoopbackServer, stream: bool
) -> None:
    model.script = always_expand
    body = {k: v for k, v in conversation().items() if k != "tools"}  # no tools of its own: only the proxy's
    if stream:
        with sdk(proxy).messages.stream(**body, extra_headers=HEADERS) as streamed:
            final = streamed.get_final_message()
    else:
        final = sdk(proxy).messages.create(**body, extra_headers=HEADERS)
    assert final.content[-1].text == "Giving up on it." and final.stop_reason == "end_turn"  # type: ignore[union-attr]
    assert [p["tools"] for p in model.received] == [[EXPAND]] * 4  # the API takes tool uses only beside tools
    assert [p.get("tool_choice") for p in model.received] == [None, None, None, {"type": "none"}]
    assert [b.type for b in final.content] == ["thinking"] * 3 + ["text"]
    usage = final.usage
    assert (usage.input_tokens, usage.output_tokens) == (400, 40)
    assert scrape(proxy.url).get("compaction_proxy_expand_rounds_total", outcome="capped") == 1
    valid(model)


@pytest.mark.parametrize("stream", [False, True])
def test_an_upstream_error_on_a_later_round_reaches_the_client(
    model: ScriptedMessages, proxy: LoopbackServer, stream: bool
) -> None:
    model.script = lambda p: Reply(status=529) if len(model.received) > 1 else reader(p)
    with pytest.raises(anthropic.APIError) as raised:
        if stream:
            with sdk(proxy).messages.stream(**conversation(), extra_headers=HEADERS) as streamed:
                streamed.get_final_message()
        else:
            sdk(proxy).messages.create(**conversation(), extra_headers=HEADERS)
    if stream:
        assert "529" in str(raised.value)
    else:  # relayed whole, as the API answered it
        assert isinstance(raised.value, anthropic.APIStatusError) and raised.value.status_code == 529
        assert raised.value.body == {"type": "error", "error": {"type": "overloaded_error", "message": "scripted 529"}}


def test_the_dry_run_shows_the_tool_it_would_add(proxy: LoopbackServer) -> None:
    report = httpx.post(f"{proxy.url}/compact/messages", json=conversation(), headers=HEADERS).json()
    assert report["added_tools"] == [EXPAND]
    assert sum(1 for b in blocks(report, "tool_result") if refs_in(str(b["content"]))) == 5
