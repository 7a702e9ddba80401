"""The expand tool end to end: the openai SDK through the proxy to a scripted model on loopback that calls it.

The model's script reads what it is sent as a model would: a stub says `call compaction_expand with ref="..."`,
the model calls the tool when the tool is offered, and answers from what comes back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse

from app import Settings, create_app
from app.cache import open_backend
from app.expansion.memory import ExpansionMemory
from app.expansion.rounds import Round
from strategies.refs import EXPAND_TOOL, refs_in
from tests.factories import agent_loop, assistant, call, output, result, user
from tests.support.metrics import scrape
from tests.support.redis_server import redis_server
from tests.support.scripted_model import USAGE, ScriptedModel, Turn
from tests.support.servers import LoopbackServer

HEADERS = {"X-Compaction-Strategies": "mask(keep=1,epoch=0,min_gain=0)"}
# In epochs, as a conversation's requests are compacted for the provider's cache to keep matching.
IN_EPOCHS = {"X-Compaction-Strategies": "mask(keep=1,epoch=2,min_gain=0)"}


def expand_call(ref: str, call_id: str = "call_x1", **lines: int) -> tuple[str, str, str]:
    return (call_id, EXPAND_TOOL, json.dumps({"ref": ref, **lines}))


def offered(payload: dict[str, Any]) -> bool:
    return any(t.get("function", {}).get("name") == EXPAND_TOOL for t in payload.get("tools") or [])


def expanded_refs(messages: list[dict[str, Any]]) -> set[str]:
    return {
        json.loads(c["function"]["arguments"])["ref"]
        for m in messages
        for c in m.get("tool_calls") or []
        if c["function"]["name"] == EXPAND_TOOL
    }


def oldest_stub(messages: list[dict[str, Any]]) -> str | None:
    found = [r for m in messages if m["role"] == "tool" for r in refs_in(m["content"] or "")]
    return found[0] if found else None


def reader(payload: dict[str, Any]) -> Turn:
    """A model that needs the oldest tool output: it expands its stub unless it has read it already, then
    quotes its first line."""
    messages = payload["messages"]
    last = messages[-1]
    if last["role"] == "tool" and last["tool_call_id"].startswith("call_x"):
        return Turn(text="Found: " + last["content"].splitlines()[0])
    ref = oldest_stub(messages)
    if ref is not None and offered(payload) and ref not in expanded_refs(messages):
        return Turn(text="Let me look.", calls=[expand_call(ref)])
    return Turn(text="Done.")


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    scripted = ScriptedModel(reader)
    with LoopbackServer(scripted.app) as server:
        scripted.url = server.url  # type: ignore[attr-defined]
        yield scripted


def proxy_for(model: ScriptedModel, **overrides: Any) -> LoopbackServer:
    settings = Settings(upstream_base_url=f"{model.url}/v1", **overrides)  # type: ignore[attr-defined]
    return LoopbackServer(create_app(settings), settings)


@pytest.fixture
def proxy(model: ScriptedModel) -> Iterator[LoopbackServer]:
    with proxy_for(model) as server:
        yield server


def sdk(proxy: LoopbackServer, key: str = "sk-test-key") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=key, max_retries=0)


def ask(proxy: LoopbackServer) -> Any:
    """The conversation, sent once through the openai SDK with the masking chain."""
    return sdk(proxy).chat.completions.create(
        model="gpt-4o",
        messages=conversation(),  # type: ignore[arg-type]
        extra_headers=HEADERS,
    )


def conversation() -> list[dict[str, Any]]:
    return agent_loop(6, 2000)  # six reads of 2,000 chars: mask(keep=1) stubs five


FIRST_LINE = output(0, 2000).splitlines()[0]


def test_a_whole_answer_comes_after_the_round_with_the_original_and_summed_usage(
    model: ScriptedModel, proxy: LoopbackServer
) -> None:
    raw = sdk(proxy).chat.completions.with_raw_response.create(
        model="gpt-4o",
        messages=conversation(),
        extra_headers=HEADERS,  # type: ignore[arg-type]
    )
    completion = raw.parse()
    message = completion.choices[0].message
    assert message.content == f"Found: {FIRST_LINE}"
    assert message.tool_calls is None and completion.choices[0].finish_reason == "stop"
    assert raw.headers["x-compaction-expansions"] == "1"
    assert completion.usage is not None and completion.usage.prompt_tokens == 2 * USAGE["prompt_tokens"]
    assert completion.usage.prompt_tokens_details.cached_tokens == 80  # type: ignore[union-attr]
    first, second = model.received
    assert [t["function"]["name"] for t in first["tools"]] == [EXPAND_TOOL]
    # The second request is the first plus the round: the call and the original, whole.
    assert second["messages"][: len(first["messages"])] == first["messages"]
    call_message, answer = second["messages"][len(first["messages"]) :]
    assert call_message["tool_calls"][0]["function"]["arguments"] == json.dumps(
        {"ref": oldest_stub(first["messages"])}, separators=(",", ":")
    )
    assert answer == {"role": "tool", "tool_call_id": "call_x1", "content": output(0, 2000)}
    assert second["tools"] == first["tools"]


def test_a_streamed_answer_runs_on_in_one_response_without_the_internal_call(
    model: ScriptedModel, proxy: LoopbackServer
) -> None:
    stream = sdk(proxy).chat.completions.create(
        model="gpt-4o",
        messages=conversation(),  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=HEADERS,
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip() == f"Let me look. Found: {FIRST_LINE}".strip()
    assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    assert {c.id for c in chunks} == {"chatcmpl-1"}
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.role) == 1
    usage = [c.usage for c in chunks if c.usage is not None]
    assert len(usage) == 1 and usage[0].prompt_tokens == 2 * USAGE["prompt_tokens"]
    assert len(model.received) == 2


def always_expand(payload: dict[str, Any]) -> Turn:
    if offered(payload):
        return Turn(calls=[expand_call(oldest_stub(payload["messages"]) or "", f"call_x{len(payload['messages'])}")])
    return Turn(text="Giving up on it.")


@pytest.mark.parametrize("stream", [False, True])
def test_the_round_cap_holds_then_the_model_is_asked_without_the_tool(
    model: ScriptedModel, proxy: LoopbackServer, stream: bool
) -> None:
    model.script = always_expand
    created = sdk(proxy).chat.completions.create(
        model="gpt-4o",
        messages=conversation(),
        stream=stream,
        extra_headers=HEADERS,  # type: ignore[arg-type]
    )
    if stream:
        text = "".join(c.choices[0].delta.content or "" for c in created if c.choices)  # type: ignore[union-attr]
    else:
        text = created.choices[0].message.content  # type: ignore[union-attr]
    assert text.strip() == "Giving up on it."
    # expand_max_rounds (3) answered, then one request without the tool.
    assert [offered(p) for p in model.received] == [True, True, True, False]
    assert "tools" not in model.received[-1]  # the client sent none: the last request is as the client's was
    samples = scrape(proxy.url)
    assert samples.get("compaction_proxy_expand_rounds_total", outcome="answered") == 3
    assert samples.get("compaction_proxy_expand_rounds_total", outcome="capped") == 1


def test_a_ref_that_does_not_resolve_gets_a_tool_error_and_the_answer_still_comes(
    model: ScriptedModel, proxy: LoopbackServer
) -> None:
    def bad_ref(payload: dict[str, Any]) -> Turn:
        if payload["messages"][-1]["role"] == "tool" and payload["messages"][-1]["tool_call_id"] == "call_x1":
            return Turn(text="That ref was wrong.")
        return Turn(calls=[expand_call("deadbeef00")])

    model.script = bad_ref
    completion = ask(proxy)
    assert completion.choices[0].message.content == "That ref was wrong."
    error = model.received[1]["messages"][-1]["content"]
    assert error.startswith('Error: no content with ref="deadbeef00" in this conversation.')
    assert scrape(proxy.url).get("compaction_proxy_expand_calls_total", result="unresolved") == 1


@pytest.mark.parametrize(
    "arguments", ['{"ref": 12}', "{not json", json.dumps({"ref": "x" * 100_000})], ids=["type", "json", "huge"]
)
def test_bad_arguments_get_a_tool_error_never_a_crash(
    model: ScriptedModel, proxy: LoopbackServer, arguments: str
) -> None:
    def bad_call(payload: dict[str, Any]) -> Turn:
        answered = payload["messages"][-1].get("tool_call_id") == "call_x1"
        return Turn(text="ok") if answered else Turn(calls=[("call_x1", EXPAND_TOOL, arguments)])

    model.script = bad_call
    completion = ask(proxy)
    assert completion.choices[0].message.content == "ok"
    assert model.received[1]["messages"][-1]["content"].startswith("Error: ")
    assert len(json.dumps(model.received[1]["messages"][-2])) < 5000  # at most MAX_ARGUMENTS echoed back


def test_the_next_turn_shows_the_round_again_so_the_model_does_not_expand_the_same_ref(
    model: ScriptedModel, proxy: LoopbackServer
) -> None:
    client = sdk(proxy)
    first = conversation()
    answer = client.chat.completions.create(model="gpt-4o", messages=first, extra_headers=IN_EPOCHS)  # type: ignore[arg-type]
    second = [*first, assistant(answer.choices[0].message.content or ""), user("Thanks. Now finish the fix.")]
    final = client.chat.completions.create(model="gpt-4o", messages=second, extra_headers=IN_EPOCHS)  # type: ignore[arg-type]
    assert final.choices[0].message.content == "Done."
    assert len(model.received) == 3  # two for the first turn, one for the second: no second expansion
    round_two, turn_two = model.received[1]["messages"], model.received[2]["messages"]
    # The second turn extends, message for message, the request the provider saw with the round in it.
    assert turn_two[: len(round_two)] == round_two
    assert turn_two[len(round_two)] == {"role": "assistant", "content": f"Found: {FIRST_LINE}"}

    # Another client (another key: another scope) sending the same history was never shown the round.
    model.received.clear()
    sdk(proxy, key="sk-other-key").chat.completions.create(model="gpt-4o", messages=second, extra_headers=IN_EPOCHS)  # type: ignore[arg-type]
    assert len(model.received) == 2 and expanded_refs(model.received[1]["messages"])


def test_rounds_are_remembered_across_replicas_sharing_redis(model: ScriptedModel) -> None:
    with redis_server() as url, proxy_for(model, cache_url=url) as one, proxy_for(model, cache_url=url) as two:
        first = conversation()
        answer = sdk(one).chat.completions.create(model="gpt-4o", messages=first, extra_headers=IN_EPOCHS)  # type: ignore[arg-type]
        second = [*first, assistant(answer.choices[0].message.content or ""), user("Go on.")]
        sdk(two).chat.completions.create(model="gpt-4o", messages=second, extra_headers=IN_EPOCHS)  # type: ignore[arg-type]
    assert len(model.received) == 3
    assert model.received[2]["messages"][: len(model.received[1]["messages"])] == model.received[1]["messages"]


def test_expand_calls_beside_the_clients_own_are_dropped_and_the_client_gets_its_calls(
    model: ScriptedModel, proxy: LoopbackServer
) -> None:
    model.script = lambda p: Turn(calls=[expand_call(oldest_stub(p["messages"]) or ""), ("call_9", "read", "{}")])
    tools = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]
    for stream in (False, True):
        created = sdk(proxy).chat.completions.create(
            model="gpt-4o",
            messages=conversation(),
            tools=tools,
            stream=stream,
            extra_headers=HEADERS,  # type: ignore[arg-type]
        )
        if stream:
            deltas = [d for c in created for d in (c.choices[0].delta.tool_calls or []) if c.choices]  # type: ignore[union-attr]
            assert {d.index for d in deltas} == {0} and {d.function.name for d in deltas if d.function.name} == {"read"}  # type: ignore[union-attr]
        else:
            calls = created.choices[0].message.tool_calls  # type: ignore[union-attr]
            assert [c.function.name for c in calls or []] == ["read"]  # type: ignore[union-attr]
    assert len(model.received) == 2  # one request each: nothing internal
    assert [t["function"]["name"] for t in model.received[0]["tools"]] == ["read", EXPAND_TOOL]


@pytest.mark.parametrize(
    ("fields", "expand_tools"),
    [
        ({"n": 2}, 0),  # n choices: the proxy would have n rounds to run
        # The client's own tool of that name: not ours to offer, and its calls are the client's to answer.
        ({"tools": [{"type": "function", "function": {"name": EXPAND_TOOL, "parameters": {"type": "object"}}}]}, 0),
        ({"functions": [{"name": "f", "parameters": {"type": "object"}}]}, 0),  # cannot be mixed with tools
        ({"tool_choice": "none"}, 1),  # offered all the same: the same bytes as on the turns before
    ],
    ids=["n", "own-tool", "functions", "tool_choice-none"],
)
def test_when_the_tool_is_offered(
    model: ScriptedModel, proxy: LoopbackServer, fields: dict[str, Any], expand_tools: int
) -> None:
    model.script = lambda p: Turn(text="ok")
    httpx.post(
        f"{proxy.url}/v1/chat/completions",
        json={"model": "gpt-4o", "messages": conversation(), **fields},
        headers={**HEADERS, "Authorization": "Bearer sk-test"},
    ).raise_for_status()
    tools = [t["function"]["name"] for t in model.received[0].get("tools") or []]
    assert tools.count(EXPAND_TOOL) == expand_tools + ("tools" in fields)
    # Where the tool is not offered mask runs its fallback: no result is masked without a way back.
    stubs = [m["content"] for m in model.received[0]["messages"] if "output elided" in (m.get("content") or "")]
    assert len(stubs) == (5 if expand_tools else 0)
    if "tools" in fields:  # the client's own tool of that name: its calls are the client's to answer
        assert model.received[0]["tools"] == fields["tools"]


def test_no_stub_no_tool_and_the_request_goes_as_it_came(model: ScriptedModel, proxy: LoopbackServer) -> None:
    model.script = lambda p: Turn(text="ok")
    body = json.dumps({"model": "gpt-4o", "messages": [user("hi"), call("a"), result("a", "short")]}).encode()
    headers = {**HEADERS, "Authorization": "Bearer sk-test", "Content-Type": "application/json"}
    response = httpx.post(f"{proxy.url}/v1/chat/completions", content=body, headers=headers)
    assert response.status_code == 200 and "x-compaction-expansions" not in response.headers
    assert "tools" not in model.received[0]


@pytest.mark.parametrize("stream", [False, True])
def test_an_upstream_error_on_a_later_round_reaches_the_client(
    model: ScriptedModel, proxy: LoopbackServer, stream: bool
) -> None:
    model.script = lambda p: Turn(status=529) if len(model.received) > 1 else reader(p)
    with pytest.raises(openai.APIError) as raised:
        created = sdk(proxy).chat.completions.create(
            model="gpt-4o",
            messages=conversation(),
            stream=stream,
            extra_headers=HEADERS,  # type: ignore[arg-type]
        )
        list(created) if stream else None  # type: ignore[call-overload]
    if stream:
        assert "529" in str(raised.value)
    else:
        assert isinstance(raised.value, openai.APIStatusError) and raised.value.status_code == 529
        assert raised.value.body == {
            "message": "scripted failure 529",
            "type": "server_error",
            "param": None,
            "code": None,
        }


def test_the_dry_run_shows_the_tool_it_would_add(proxy: LoopbackServer) -> None:
    response = httpx.post(
        f"{proxy.url}/compact",
        json={"model": "gpt-4o", "messages": conversation()},
        headers={**HEADERS, "Authorization": "Bearer sk-test"},
    )
    report = response.json()
    assert [t["function"]["name"] for t in report["added_tools"]] == [EXPAND_TOOL]
    assert sum(1 for m in report["messages"] if refs_in(str(m.get("content")))) == 5


def test_a_responses_request_gets_stubs_without_the_tool_it_is_not_offered(
    model: ScriptedModel, proxy: LoopbackServer
) -> None:
    # The expand tool is answered on chat completions only: a Responses request's stubs name no ref.
    forwarded: list[dict[str, Any]] = []

    async def responses(request: Request) -> JSONResponse:
        forwarded.append(await request.json())
        return JSONResponse({"id": "resp_1", "object": "response", "status": "completed", "output": []})

    model.app.add_route("/v1/responses", responses, methods=["POST"])
    items: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(3):
        items.append({"type": "function_call", "call_id": f"c{i}", "name": "read_file", "arguments": "{}"})
        items.append({"type": "function_call_output", "call_id": f"c{i}", "output": output(i, 2000)})
    response = httpx.post(
        f"{proxy.url}/v1/responses",
        json={"model": "gpt-4o", "input": items},
        headers={"X-Compaction-Strategies": "clear_tool_uses(trigger=0,keep=1)", "Authorization": "Bearer sk-test"},
    )
    assert response.status_code == 200
    outputs = [i["output"] for i in forwarded[0]["input"] if i.get("type") == "function_call_output"]
    assert outputs[0] == "[read_file output elided: 2,000 chars]" and outputs[-1] == output(2, 2000)
    assert "tools" not in forwarded[0]
    # mask runs its fallback there: nothing is masked without a way back.
    masked = httpx.post(
        f"{proxy.url}/v1/responses",
        json={"model": "gpt-4o", "input": items},
        headers={**HEADERS, "Authorization": "Bearer sk-test"},
    )
    assert masked.headers["x-compaction-fallback"] == "not_expandable"
    assert [i["output"] for i in forwarded[1]["input"] if i.get("type") == "function_call_output"] == [
        output(i, 2000) for i in range(3)
    ]


def test_with_the_tool_switched_off_no_stub_names_it(model: ScriptedModel) -> None:
    model.script = lambda p: Turn(text="ok")
    with proxy_for(model, expand_max_rounds=0) as proxy:
        httpx.post(
            f"{proxy.url}/v1/chat/completions",
            json={"model": "gpt-4o", "messages": conversation()},
            headers={"X-Compaction-Strategies": "clear_tool_uses(trigger=0,keep=1)", "Authorization": "Bearer sk-test"},
        ).raise_for_status()
    sent = model.received[0]
    assert "tools" not in sent and EXPAND_TOOL not in json.dumps(sent["messages"])
    assert sum("output elided" in (m.get("content") or "") for m in sent["messages"]) == 5


def test_a_rounds_tag_is_remembered_with_it_and_rounds_stored_without_one_read_the_same() -> None:
    memory = ExpansionMemory(open_backend("memory://", ttl=60, max_entries=10))
    tagged = Round(3, "ab", (("toolu_1", '{"ref":"0a1b2c3d4e"}'),), "sc:0123456789abcdef")
    memory.remember("k", [Round(2, "aa", (("call_1", '{"ref":"0a1b2c3d4e"}'),)), tagged])
    assert memory.recall("k")[1] == tagged and memory.recall("k")[0].shown == ""
    # What the cache holds is untrusted: a tag that is no string, or one too long, drops its round.
    memory.backend.put("k", json.dumps([[3, "ab", [["c", "{}"]], 7], [3, "ab", [["c", "{}"]], "s" * 999]]))
    assert memory.recall("k") == []
