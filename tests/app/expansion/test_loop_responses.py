"""The expand tool on /v1/responses end to end: the openai SDK (`client.responses`) through the proxy to a scripted
Responses model on loopback (tests.support.responses) that calls it when it sees a stub, and answers from the
original. Each request the model gets is checked against the API's rules: calls and outputs paired, every reasoning
item as the model made it, directly before the item it came with.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from app import Settings, create_app
from app.wire.responses.expand import TOOL
from strategies.refs import EXPAND_TOOL, refs_in
from tests.factories import output
from tests.support.metrics import scrape
from tests.support.responses import USAGE, ScriptedResponses, Turn
from tests.support.servers import LoopbackServer

HEADERS = {"X-Compaction-Strategies": "mask(keep=1,epoch=0,min_gain=0)"}
# In epochs, as a conversation's requests are compacted for the provider's cache to keep matching.
IN_EPOCHS = {"X-Compaction-Strategies": "mask(keep=1,epoch=2,min_gain=0)"}
INSTRUCTIONS = "You are a coding agent."
FIRST_LINE = output(0, 2000).splitlines()[0]
ENCRYPTED = ["reasoning.encrypted_content"]


def earlier_turns(n: int) -> list[dict[str, Any]]:
    """Rounds of the model's own before this request: a reasoning item, a read_file call, its output (2,000 chars)."""
    items: list[dict[str, Any]] = []
    for i in range(n):
        items.append({"id": f"rs_old_{i}", "type": "reasoning", "summary": [], "encrypted_content": f"old{i}" * 30})
        items.append({"id": f"fc_old_{i}", "type": "function_call", "status": "completed", "call_id": f"call_{i}",
                      "name": "read_file", "arguments": json.dumps({"path": f"src/file_{i}.py"})})  # fmt: skip
        items.append({"type": "function_call_output", "call_id": f"call_{i}", "output": output(i, 2000)})
    return items


def conversation() -> list[dict[str, Any]]:
    """The task, then six reads of 2,000 chars: mask(keep=1) stubs five."""
    return [{"type": "message", "role": "user", "content": "Fix the failing test."}, *earlier_turns(6)]


def offered(payload: dict[str, Any]) -> bool:
    return any(t.get("name") == EXPAND_TOOL for t in payload.get("tools") or [])


def stubs(items: list[dict[str, Any]]) -> list[str]:
    return [r for i in items if i.get("type") == "function_call_output" for r in refs_in(str(i["output"]))]


def expanded_refs(items: list[dict[str, Any]]) -> set[str]:
    return {
        json.loads(i["arguments"])["ref"]
        for i in items
        if i.get("type") == "function_call" and i.get("name") == EXPAND_TOOL
    }


def reader(payload: dict[str, Any]) -> Turn:
    """A model that needs the oldest tool output: it expands its stub unless it has read it, then quotes it."""
    items = payload["input"]
    last = items[-1]
    if last.get("type") == "function_call_output" and last["call_id"].startswith("call_x"):
        return Turn(text="Found: " + last["output"].splitlines()[0])
    found = stubs(items)
    if found and offered(payload) and found[0] not in expanded_refs(items):
        return Turn(text="Let me look.", calls=[("call_x1", EXPAND_TOOL, json.dumps({"ref": found[0]}))])
    return Turn(text="Done.")


@pytest.fixture
def model() -> Iterator[ScriptedResponses]:
    scripted = ScriptedResponses(reader)
    earlier = earlier_turns(6)
    for i in range(6):  # the earlier turns' reasoning and calls are the model's too
        scripted.produced[f"resp_old_{i}"] = earlier[3 * i : 3 * i + 2]
    with LoopbackServer(scripted.app) as server:
        scripted.url = server.url
        yield scripted


def proxy_for(model: ScriptedResponses, **overrides: Any) -> LoopbackServer:
    settings = Settings(upstream_base_url=f"{model.url}/v1", **overrides)
    return LoopbackServer(create_app(settings), settings)


@pytest.fixture
def proxy(model: ScriptedResponses) -> Iterator[LoopbackServer]:
    with proxy_for(model) as server:
        yield server


def sdk(proxy: LoopbackServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-test-key", max_retries=0)


def create(proxy: LoopbackServer, items: list[dict[str, Any]], **fields: Any) -> Any:
    headers = fields.pop("extra_headers", HEADERS)
    return sdk(proxy).responses.create(
        model="gpt-5", instructions=INSTRUCTIONS, input=items, include=ENCRYPTED, extra_headers=headers, **fields
    )


def assert_valid(model: ScriptedResponses) -> None:
    for payload in model.received:
        assert model.problems(payload["input"]) == []


def summed(rounds: int) -> dict[str, Any]:
    return {
        "input_tokens": rounds * USAGE["input_tokens"],
        "input_tokens_details": {"cached_tokens": rounds * 40},
        "output_tokens": rounds * USAGE["output_tokens"],
        "output_tokens_details": {"reasoning_tokens": rounds * 4},
        "total_tokens": rounds * USAGE["total_tokens"],
    }


def assert_one_round_with_the_original(model: ScriptedResponses, store: bool) -> None:
    """Two requests: the first with the tool after the client's (none), the second the first plus the round."""
    first, second = model.received
    assert first["tools"] == [TOOL] and second["tools"] == first["tools"]
    assert first["store"] is store and second["store"] is store
    assert second["input"][: len(first["input"])] == first["input"]
    reasoning, message, call, result = second["input"][len(first["input"]) :]
    produced = model.produced["resp_1"]
    assert reasoning == produced[0] and message == produced[1]  # byte for byte, encrypted_content and all
    arguments = json.dumps({"ref": stubs(first["input"])[0]}, separators=(",", ":"))
    assert call == {"type": "function_call", "id": "fc_1_0", "status": "completed", "call_id": "call_x1",
                    "name": EXPAND_TOOL, "arguments": arguments}  # fmt: skip
    assert result == {"type": "function_call_output", "call_id": "call_x1", "output": output(0, 2000)}
    assert_valid(model)


@pytest.mark.parametrize("store", [True, False])
def test_a_whole_answer_comes_after_the_round_with_the_original_and_summed_usage(
    model: ScriptedResponses, proxy: LoopbackServer, store: bool
) -> None:
    raw = sdk(proxy).responses.with_raw_response.create(
        model="gpt-5", instructions=INSTRUCTIONS, input=conversation(), include=ENCRYPTED, store=store,
        extra_headers=HEADERS,  # type: ignore[arg-type]
    )  # fmt: skip
    response = raw.parse()
    assert raw.headers["x-compaction-expansions"] == "1" and "x-compaction-fallback" not in raw.headers
    # Every round's items but the internal call: its reasoning and text, then the answer's.
    assert [item.type for item in response.output] == ["reasoning", "message", "reasoning", "message"]
    assert response.output_text == f"Let me look.Found: {FIRST_LINE}"
    assert response.id == "resp_2"  # the last round's: the response the server holds with the round in its input
    assert response.tools == []  # its echo of the request's tools: the client's, none
    assert response.usage is not None and response.usage.to_dict() == summed(2)
    assert_one_round_with_the_original(model, store)


def stream_of(proxy: LoopbackServer, items: list[dict[str, Any]], **fields: Any) -> list[Any]:
    return list(create(proxy, items, stream=True, **fields))


@pytest.mark.parametrize("store", [True, False])
def test_a_stream_is_one_response_across_the_rounds_without_the_internal_call(
    model: ScriptedResponses, proxy: LoopbackServer, store: bool
) -> None:
    events = stream_of(proxy, conversation(), store=store)
    types = [e.type for e in events]
    assert types.count("response.created") == 1 and types.count("response.in_progress") == 1
    assert types.count("response.completed") == 1 and types[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [e.output_index for e in added] == [0, 1, 2, 3]
    assert [e.item.type for e in added] == ["reasoning", "message", "reasoning", "message"]
    assert not any(e.type.startswith("response.function_call_arguments") for e in events)
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text.split() == f"Let me look. Found: {FIRST_LINE}".split()
    summaries = [e.delta for e in events if e.type == "response.reasoning_summary_text.delta"]
    assert "".join(summaries) == "Thinking over request 1.Thinking over request 2."
    completed = events[-1].response
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert completed.output == done  # exactly what the client was shown
    assert completed.id == events[0].response.id == "resp_1"
    assert completed.tools == events[0].response.tools == []  # the echo of the client's tools: none
    assert completed.usage.to_dict() == summed(2)
    assert_one_round_with_the_original(model, store)


def test_the_sdks_stream_helper_takes_it_as_one_response(model: ScriptedResponses, proxy: LoopbackServer) -> None:
    # responses.stream checks what a plain iteration does not: one response id, each index once, every item done.
    with sdk(proxy).responses.stream(
        model="gpt-5", instructions=INSTRUCTIONS, input=conversation(), include=ENCRYPTED,  # type: ignore[arg-type]
        extra_headers=HEADERS,
    ) as stream:  # fmt: skip
        final = stream.get_final_response()
    assert final.output_text == f"Let me look.Found: {FIRST_LINE}"
    assert [item.type for item in final.output] == ["reasoning", "message", "reasoning", "message"]
    assert len(model.received) == 2


def next_request(first: list[dict[str, Any]], shown: list[Any]) -> list[dict[str, Any]]:
    """The client's next request: its history, what it was shown (as the SDK gives it back), a new message."""
    return [*first, *(item.to_dict() for item in shown), {"type": "message", "role": "user", "content": "Go on."}]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("store", [True, False])
def test_the_next_turn_shows_the_round_again_where_it_went_so_the_request_extends_the_one_the_provider_saw(
    model: ScriptedResponses, proxy: LoopbackServer, store: bool, stream: bool
) -> None:
    first = conversation()
    if stream:
        shown = stream_of(proxy, first, store=store, extra_headers=IN_EPOCHS)[-1].response.output
    else:
        shown = create(proxy, first, store=store, extra_headers=IN_EPOCHS).output
    final = create(proxy, next_request(first, shown), store=store, extra_headers=IN_EPOCHS)
    assert final.output_text == "Done."  # the model found the round: no second expansion
    assert len(model.received) == 3
    round_two, turn_two = model.received[1]["input"], model.received[2]["input"]
    # Item for item the request the provider saw with the round, then the answer to it, then what is new.
    assert turn_two[: len(round_two)] == round_two
    assert turn_two[len(round_two) :] == [*model.produced["resp_2"], next_request([], [])[-1]]
    assert_valid(model)


def test_a_client_that_drops_the_rounds_reasoning_gets_the_round_as_its_call_alone(
    model: ScriptedResponses, proxy: LoopbackServer
) -> None:
    first = conversation()
    shown = create(proxy, first, extra_headers=IN_EPOCHS).output
    kept = [item for item in shown if item.type != "reasoning"]  # a client that keeps no reasoning
    create(proxy, next_request(first, kept), extra_headers=IN_EPOCHS)
    turn_two = model.received[2]["input"]
    calls = [item for item in turn_two if item.get("name") == EXPAND_TOOL]
    assert calls == [{"type": "function_call", "call_id": "call_x1", "name": EXPAND_TOOL,
                      "arguments": calls[0]["arguments"]}]  # fmt: skip  # no id: no reasoning before it
    assert len(model.received) == 3
    # Paired, and what the API may refuse is the client's own doing: its messages without their reasoning.
    assert [p.split(": ", 1)[1] for p in model.problems(turn_two)] == [
        "msg_1 without its reasoning rs_1 before it",
        "msg_2 without its reasoning rs_2 before it",
    ]


def always_expand(payload: dict[str, Any]) -> Turn:
    if offered(payload):
        ref = stubs(payload["input"])[0]
        return Turn(calls=[(f"call_x{len(payload['input'])}", EXPAND_TOOL, json.dumps({"ref": ref}))])
    return Turn(text="Giving up on it.")


@pytest.mark.parametrize("stream", [False, True])
def test_the_round_cap_holds_then_the_model_is_asked_without_the_tool(
    model: ScriptedResponses, proxy: LoopbackServer, stream: bool
) -> None:
    model.script = always_expand
    if stream:
        events = stream_of(proxy, conversation())
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        output = events[-1].response.output
    else:
        response = create(proxy, conversation())
        text, output = response.output_text, response.output
    assert text.strip() == "Giving up on it."
    assert [item.type for item in output] == ["reasoning"] * 4 + ["message"]
    assert [offered(p) for p in model.received] == [True, True, True, False]
    assert "tools" not in model.received[-1]  # the client sent none: the last request is as the client's was
    assert_valid(model)
    assert scrape(proxy.url).get("compaction_proxy_expand_rounds_total", outcome="capped") == 1


@pytest.mark.parametrize("stream", [False, True])
def test_expand_calls_beside_the_clients_own_are_dropped_and_the_client_gets_its_call(
    model: ScriptedResponses, proxy: LoopbackServer, stream: bool
) -> None:
    model.script = lambda p: Turn(
        calls=[("call_x1", EXPAND_TOOL, json.dumps({"ref": stubs(p["input"])[0]})), ("call_9", "read_file", "{}")]
    )
    tools = [{"type": "function", "name": "read_file", "parameters": {"type": "object"}}]
    if stream:
        events = stream_of(proxy, conversation(), tools=tools)
        added = [e for e in events if e.type == "response.output_item.added"]
        assert [(e.output_index, e.item.type) for e in added] == [(0, "reasoning"), (1, "function_call")]
        output = events[-1].response.output
    else:
        output = create(proxy, conversation(), tools=tools).output
    assert [(item.type, getattr(item, "name", None)) for item in output] == [
        ("reasoning", None),
        ("function_call", "read_file"),
    ]
    assert len(model.received) == 1  # nothing internal
    assert [t["name"] for t in model.received[0]["tools"]] == ["read_file", EXPAND_TOOL]


def post(proxy: LoopbackServer, path: str, body: dict[str, Any], headers: dict[str, str] = HEADERS) -> httpx.Response:
    return httpx.post(f"{proxy.url}{path}", json=body, headers={**headers, "Authorization": "Bearer sk-test"})


OWN_TOOL = {"type": "function", "name": EXPAND_TOOL, "parameters": {"type": "object"}}


@pytest.mark.parametrize(
    "fields",
    [
        {"tools": [OWN_TOOL]},
        {"tools": [{"type": "namespace", "name": "functions", "tools": [OWN_TOOL]}]},
        {"additional_tools": [OWN_TOOL]},  # Codex gives its tools in an input item
        {"previous_response_id": "resp_0"},  # the server holds what the proxy cannot see
        {"background": True},  # nobody would read the rounds
    ],
    ids=["own-tool", "namespaced", "additional_tools", "previous_response_id", "background"],
)
def test_when_the_tool_is_not_offered_mask_runs_its_fallback(
    model: ScriptedResponses, proxy: LoopbackServer, fields: dict[str, Any]
) -> None:
    model.script = lambda p: Turn(text="ok")
    body: dict[str, Any] = {"model": "gpt-5", "input": conversation()}
    if "additional_tools" in fields:
        body["input"] = [{"type": "additional_tools", "role": "developer", "tools": fields["additional_tools"]},
                         *body["input"]]  # fmt: skip
    else:
        body.update(fields)
    response = post(proxy, "/v1/responses", body)
    assert response.status_code == 200 and response.headers["x-compaction-fallback"] == "not_expandable"
    sent = model.received[0]
    assert sent.get("tools") == body.get("tools")  # the client's own, as sent
    assert stubs(sent["input"]) == []  # no result is masked without a way back


def test_with_the_tool_switched_off_it_is_never_offered(model: ScriptedResponses) -> None:
    model.script = lambda p: Turn(text="ok")
    with proxy_for(model, expand_max_rounds=0) as proxy:
        response = post(proxy, "/v1/responses", {"model": "gpt-5", "input": conversation()})
    assert response.headers["x-compaction-fallback"] == "not_expandable"
    assert "tools" not in model.received[0] and EXPAND_TOOL not in json.dumps(model.received[0])


def test_tool_choice_and_parallel_tool_calls_go_as_sent(model: ScriptedResponses, proxy: LoopbackServer) -> None:
    model.script = lambda p: Turn(text="ok")
    fields = {"tool_choice": "none", "parallel_tool_calls": False}
    post(proxy, "/v1/responses", {"model": "gpt-5", "input": conversation(), **fields}).raise_for_status()
    sent = model.received[0]
    assert {k: sent[k] for k in fields} == fields and sent["tools"] == [TOOL]


def test_the_default_chain_masks_with_the_tool_offered(model: ScriptedResponses, proxy: LoopbackServer) -> None:
    model.script = lambda p: Turn(text="ok")
    items = [{"type": "message", "role": "user", "content": "Fix it."}, *earlier_turns(40)]
    response = post(proxy, "/v1/responses", {"model": "gpt-5", "input": items}, headers={})
    assert response.headers["x-compaction-strategies"] == "minify,mask,window"
    assert "x-compaction-fallback" not in response.headers
    sent = model.received[0]
    assert sent["tools"] == [TOOL] and len(stubs(sent["input"])) == 30  # mask keeps the newest 10 whole


def test_the_dry_run_shows_the_tool_it_would_add(proxy: LoopbackServer) -> None:
    report = post(proxy, "/compact/responses", {"model": "gpt-5", "input": conversation()}).json()
    assert report["added_tools"] == [TOOL]
    assert len(stubs(report["input"])) == 5


@pytest.mark.parametrize("stream", [False, True])
def test_an_upstream_error_on_a_later_round_reaches_the_client(
    model: ScriptedResponses, proxy: LoopbackServer, stream: bool
) -> None:
    model.script = lambda p: Turn(status=529) if len(model.received) > 1 else reader(p)
    with pytest.raises(openai.APIError) as raised:
        created = create(proxy, conversation(), stream=stream)
        list(created) if stream else None
    if stream:
        assert "529" in str(raised.value)  # the stream ends in the Responses error event
    else:
        assert isinstance(raised.value, openai.APIStatusError) and raised.value.status_code == 529
        assert raised.value.body == {"message": "scripted failure 529", "type": "server_error", "param": None,
                                     "code": None}  # fmt: skip
