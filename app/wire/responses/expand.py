"""The expand tool in the Responses API: a function tool offered in `tools`, its `function_call` items found in a
response (whole or streamed), and the one response the client gets without them.

What the client is shown: every item of every round but the expand calls (reasoning and messages of an internal
round included, as they stream), in one response: a stream's events renumbered to run on across rounds
(`sequence_number`, `output_index`), one `response.created`, one terminal event whose `output` lists exactly what was
shown, with the usage of every round. A round's turn goes back upstream as the API produced it, its reasoning
(encrypted_content and all) in place, only the kept expand calls in it; its handles (ExpandRound.handles) name those
items, so the next turn shows the round again between the very items the client was shown around it
(app.wire.responses renders it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from app.wire.base import ExpandAnswer, ExpandStream, ModelCall, Parsed
from app.wire.chat.expand import add_usage
from app.wire.json_body import dump_json
from app.wire.responses.items import CALLS, kind
from strategies import Message
from strategies.conversation import text_of
from strategies.messages import WIRE_KEY
from strategies.refs import EXPAND_DESCRIPTION, EXPAND_PARAMETERS, EXPAND_TOOL, ExpandCall, expand_turn

# strict: false. The Responses API makes a function tool strict unless told, and a strict schema must list every
# property as required; the line range is optional, and the proxy answers arguments it cannot read with a tool error.
TOOL: dict[str, Any] = {
    "type": "function",
    "name": EXPAND_TOOL,
    "description": EXPAND_DESCRIPTION,
    "parameters": EXPAND_PARAMETERS,
    "strict": False,
}
# As the strategies count tools (app.wire.responses._request).
VIEW_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {"name": EXPAND_TOOL, "description": EXPAND_DESCRIPTION, "parameters": EXPAND_PARAMETERS},
}
# Handles (ExpandRound.handles): an item the client was shown, taken again from its next request by id; a kept call,
# made again from the call's id and arguments with its item's own id.
SHOWN, CALL = "i:", "c:"
MAX_HANDLES = 64
MAX_HANDLE_CHARS = 256
TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
LIFECYCLE = frozenset({"response.created", "response.in_progress", "response.queued"})
BYTES_PER_TOKEN = 4


def is_expand(item: Any) -> bool:
    """A call of the proxy's tool: a function call of that name outside any namespace (a namespaced tool is the
    client's)."""
    return (
        kind(item) == "function_call"
        and item.get("name") == EXPAND_TOOL
        and item.get("namespace") is None
        and isinstance(item.get("call_id"), str)
    )


def is_client_call(item: Any) -> bool:
    """A call the client answers (a function, custom, shell, computer call, an MCP approval request)."""
    return kind(item) in CALLS and not is_expand(item)


def function_call(call_id: str, arguments: str, item_id: str | None) -> dict[str, Any]:
    """A kept expand call as every request sends it: the same bytes when the round is answered and when a later
    request shows it again; with its item's id (the API pairs a reasoning item with the item after it by id).
    """
    if item_id is None:
        return {"type": "function_call", "call_id": call_id, "name": EXPAND_TOOL, "arguments": arguments}
    return {
        "type": "function_call",
        "id": item_id,
        "status": "completed",
        "call_id": call_id,
        "name": EXPAND_TOOL,
        "arguments": arguments,
    }


def _names(tools: Any) -> Iterator[str]:
    """The names of tools, those inside namespaces too."""
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, dict):
            if isinstance(tool.get("name"), str):
                yield tool["name"]
            yield from _names(tool.get("tools"))


def _client_tools(body: dict[str, Any]) -> Iterator[str]:
    """Every tool name the client gives the model: `tools`, and Codex's additional_tools items in `input`."""
    yield from _names(body.get("tools"))
    items = body.get("input")
    for item in items if isinstance(items, list) else ():
        if kind(item) == "additional_tools":
            yield from _names(item.get("tools"))


def _without_tool(response: dict[str, Any]) -> dict[str, Any]:
    """A response as the client gets it: its echo of the request's `tools` without the proxy's."""
    tools = response.get("tools")
    if not isinstance(tools, list) or not any(_is_tool(t) for t in tools):
        return response
    return {**response, "tools": [t for t in tools if not _is_tool(t)]}


def _is_tool(tool: Any) -> bool:
    return kind(tool) == "function" and tool.get("name") == EXPAND_TOOL


def _output(response: Any) -> list[dict[str, Any]]:
    output = response.get("output") if isinstance(response, dict) else None
    return [item for item in output if isinstance(item, dict)] if isinstance(output, list) else []


def _expand_calls(output: list[dict[str, Any]]) -> list[ModelCall]:
    return [(item["call_id"], _arguments(item)) for item in output if is_expand(item)]


def _arguments(item: dict[str, Any]) -> str:
    arguments = item.get("arguments")
    return arguments if isinstance(arguments, str) else ""


def _same_call(item: dict[str, Any], arguments: str) -> bool:
    """Whether a kept call (its arguments as the allowance wrote them) is this call of the model's."""
    raw = _arguments(item)
    call = ExpandCall.parse(raw)
    return raw.startswith(arguments) or (not isinstance(call, str) and call.arguments() == arguments)


def _turn_items(output: list[dict[str, Any]], kept: Sequence[tuple[str, str]], store: Any) -> list[dict[str, Any]]:
    """The response's output as it goes back upstream: as the API produced it, the expand calls left out of the round
    gone, the kept ones made as every request sends them (function_call). Without a store (store: false) a reasoning
    item without its encrypted_content cannot be read back, so it does not go.
    """
    kept_ids = {cid for cid, _ in kept}
    by_model: dict[int, tuple[str, str]] = {}
    calls = [(i, item) for i, item in enumerate(output) if is_expand(item)]
    for cid, arguments in kept:
        # The model's own id when the allowance kept it; else (an id no API takes) the first like call left.
        match = next((i for i, item in calls if item["call_id"] == cid and i not in by_model), None)
        if match is None:
            match = next(
                (
                    i
                    for i, item in calls
                    if i not in by_model and item["call_id"] not in kept_ids and _same_call(item, arguments)
                ),
                None,
            )
        if match is not None:
            by_model[match] = (cid, arguments)
    items: list[dict[str, Any]] = []
    for index, item in enumerate(output):
        if is_expand(item):
            if index in by_model:
                item_id = item.get("id")
                items.append(function_call(*by_model[index], item_id if isinstance(item_id, str) else None))
        elif not (store is False and kind(item) == "reasoning" and not item.get("encrypted_content")):
            items.append(item)
    return items


def _turn(items: list[dict[str, Any]], kept: Sequence[tuple[str, str]]) -> Message:
    """The round's assistant message in the view: its text and the kept calls for the strategies and the counts, its
    items as they go (rendered as they are, app.wire.responses).
    """
    texts = [text_of(item.get("content")) for item in items if kind(item) == "message"]
    unseen = sum(len(dump_json(item)) for item in items if kind(item) not in ("message", "function_call"))
    message = expand_turn(kept)
    message["content"] = "\n".join(t for t in texts if t) or None
    message[WIRE_KEY] = {"tokens": unseen // BYTES_PER_TOKEN, "output": items}
    return message


def _handles(items: list[dict[str, Any]], kept: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """The turn's items by id, in order (a kept call with its call id); () when one has no id, so the round is shown
    again as its calls alone.
    """
    kept_ids = {cid for cid, _ in kept}
    handles: list[str] = []
    for item in items:
        item_id = item.get("id")
        if kind(item) == "function_call" and item.get("call_id") in kept_ids and item.get("name") == EXPAND_TOOL:
            handles.append(f"{CALL}{item['call_id']}:{item_id if isinstance(item_id, str) else ''}")
        elif isinstance(item_id, str) and item_id:
            handles.append(SHOWN + item_id)
        else:
            return ()
    if len(handles) > MAX_HANDLES or any(len(h) > MAX_HANDLE_CHARS for h in handles):
        return ()
    return tuple(handles)


class Answer:
    """One round's whole answer, read; `shown`: what the client gets of it and of the rounds before it."""

    def __init__(self, body: dict[str, Any], after: Answer | None) -> None:
        self.body = body
        self.output = _output(body)
        before: list[dict[str, Any]] = after.shown if after is not None else []
        self.shown: list[dict[str, Any]] = [*before, *(item for item in self.output if not is_expand(item))]

    def expand_calls(self) -> list[ModelCall]:
        return _expand_calls(self.output) if self.body.get("status") in (None, "completed") else []

    def other_calls(self) -> bool:
        return any(is_client_call(item) for item in self.output)

    def turn(self, kept: Sequence[tuple[str, str]]) -> Message:
        return _turn(_turn_items(self.output, kept, self.body.get("store")), kept)

    def handles(self, kept: Sequence[tuple[str, str]]) -> tuple[str, ...]:
        return _handles(_turn_items(self.output, kept, self.body.get("store")), kept)

    def for_client(self, usage: dict[str, Any] | None) -> dict[str, Any]:
        """The last round's response (its id: the one the server stored with every round in its input) with the
        output of every round but the expand calls, and the usage of every round.
        """
        body = _without_tool(self.body)
        if len(self.shown) != len(self.output):
            body = {**body, "output": self.shown}
        return body if usage is None else {**body, "usage": usage}


class StreamedRound:
    """One round's SSE answer, event by event: what to pass to the client now, and what the round called.

    Events pass as they come, renumbered to go on from the round before: sequence_number runs on, output_index counts
    only the items the client is shown. An expand call's events are told apart by its item (in the first event
    naming its output_index) and never pass. A later round's response.created and in_progress do not pass; every
    round's terminal event (completed, incomplete, failed) is held: an internal round's never reaches the client, the
    last one's carries what the client was shown of every round, their usage summed, and the first round's id (the
    openai SDK refuses a stream whose response changes its id). A response's echo of `tools` leaves the proxy's out.
    """

    def __init__(self, after: StreamedRound | None = None, before: dict[str, Any] | None = None) -> None:
        self.first = after is None
        self.sequence: int = after.sequence if after is not None else 0  # the next event's sequence_number
        self.next_index: int = after.next_index if after is not None else 0  # the next shown item's output_index
        self.shown_before: list[dict[str, Any]] = after.shown() if after is not None else []
        self.first_id: str | None = after.first_id if after is not None else None
        self.before = before
        self.indices: dict[int, int | None] = {}  # the upstream's output_index -> the client's (None: not shown)
        self.items: dict[int, dict[str, Any]] = {}  # the upstream's output_index -> its item, as last seen
        self.deltas: dict[int, list[str]] = {}  # an expand call's argument deltas
        self.terminal: dict[str, Any] | None = None
        self.terminal_event: bytes | None = None
        self.usage: dict[str, Any] | None = None

    def feed(self, event: bytes) -> bytes | None:
        data = _data(event)
        what = data.get("type") if data is not None else None
        if data is None or not isinstance(what, str):
            return event + b"\n\n"  # a comment, or data the proxy does not read: as it came
        if what in LIFECYCLE:
            response = data.get("response")
            if not isinstance(response, dict):
                return self._pass(event, data) if self.first else None
            if self.first_id is None and isinstance(response.get("id"), str):
                self.first_id = response["id"]
            if not self.first:
                return None
            echoed = _without_tool(response)
            return self._pass(event, {**data, "response": echoed}, changed=echoed is not response)
        if what in TERMINAL:
            self.terminal, self.terminal_event = data, event
            response = data.get("response")
            usage = response.get("usage") if isinstance(response, dict) else None
            self.usage = usage if isinstance(usage, dict) else None
            return None
        index = data.get("output_index")
        if not isinstance(index, int) or isinstance(index, bool):
            return self._pass(event, data)
        item = data.get("item")
        if isinstance(item, dict):
            self.items[index] = item
        if index not in self.indices:
            shown = not is_expand(self.items.get(index))
            self.indices[index] = self.next_index if shown else None
            self.next_index += shown
        client_index = self.indices[index]
        if client_index is None:
            if what == "response.function_call_arguments.delta" and isinstance(data.get("delta"), str):
                self.deltas.setdefault(index, []).append(data["delta"])
            return None
        return self._pass(event, data, client_index)

    def _pass(
        self, event: bytes, data: dict[str, Any], output_index: int | None = None, changed: bool = False
    ) -> bytes:
        """The event renumbered; as it came when nothing in it changed (changed: its data is not as received)."""
        out = data
        if "sequence_number" in data:
            if data["sequence_number"] != self.sequence:
                out, changed = {**out, "sequence_number": self.sequence}, True
            self.sequence += 1
        if output_index is not None and data.get("output_index") != output_index:
            out, changed = {**out, "output_index": output_index}, True
        return _event(out) if changed else event + b"\n\n"

    def output(self) -> list[dict[str, Any]]:
        """The round's output: its terminal event's, else its items as they streamed."""
        response = self.terminal.get("response") if self.terminal is not None else None
        if isinstance(response, dict) and isinstance(response.get("output"), list):
            return _output(response)
        items = []
        for index in sorted(self.items):
            item = self.items[index]
            if is_expand(item) and not _arguments(item) and index in self.deltas:
                item = {**item, "arguments": "".join(self.deltas[index])}
            items.append(item)
        return items

    def shown(self) -> list[dict[str, Any]]:
        return [*self.shown_before, *(item for item in self.output() if not is_expand(item))]

    def expand_calls(self) -> list[ModelCall]:
        if self.terminal is None or self.terminal.get("type") != "response.completed":
            return []  # cut short, incomplete or failed: the round is final, whatever it called
        return _expand_calls(self.output())

    def other_calls(self) -> bool:
        return any(is_client_call(item) for item in self.output())

    def _store(self) -> Any:
        response = self.terminal.get("response") if self.terminal is not None else None
        return response.get("store") if isinstance(response, dict) else None

    def turn(self, kept: Sequence[tuple[str, str]]) -> Message:
        return _turn(_turn_items(self.output(), kept, self._store()), kept)

    def handles(self, kept: Sequence[tuple[str, str]]) -> tuple[str, ...]:
        return _handles(_turn_items(self.output(), kept, self._store()), kept)

    def finish(self, usage: dict[str, Any] | None) -> Iterator[bytes]:
        """The terminal event: as it came when nothing of the response changed, else with the output the client was
        shown, the usage of every round and the first round's id.
        """
        if self.terminal is None or self.terminal_event is None:
            return  # the upstream ended the stream without one: the client gets what came
        found = self.terminal.get("response")
        response = _without_tool(found) if isinstance(found, dict) else {}
        shown = self.shown()
        if self.first and usage is None and len(shown) == len(self.output()) and response is found:
            yield self._pass(self.terminal_event, self.terminal)
            return
        response = {**response, "output": shown}
        if usage is not None:
            response["usage"] = usage
        if self.first_id is not None:
            response["id"] = self.first_id
        yield self._pass(self.terminal_event, {**self.terminal, "response": response}, changed=True)


def _data(event: bytes) -> dict[str, Any] | None:
    """The JSON object of an event's data lines, else None."""
    lines = [line[5:].strip() for line in event.splitlines() if line.startswith(b"data:")]
    if not lines:
        return None
    try:
        data = json.loads(b"\n".join(lines))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _event(data: dict[str, Any]) -> bytes:
    return b"event: " + str(data["type"]).encode() + b"\ndata: " + dump_json(data) + b"\n\n"


class ResponsesExpandTool:
    """The expand tool as the Responses API carries it (wire.base.ExpandTool)."""

    definition = TOOL

    def offer(self, parsed: Parsed) -> Parsed | None:
        """The request with the expand tool after the client's own, or None when it cannot take it: a client tool of
        that name (anywhere: `tools`, namespaces, Codex's additional_tools), `tools` that is no list, a request that
        goes on from what the server holds (previous_response_id, conversation: the proxy cannot see it, and a round
        would add its input to the conversation again), or one run in the background (nobody reads its rounds).
        tool_choice and parallel_tool_calls stay as the client sent them.
        """
        body = parsed.body
        tools = body.get("tools")
        if not isinstance(tools, list | None) or body.get("background") is True:
            return None
        if body.get("previous_response_id") is not None or body.get("conversation") is not None:
            return None
        if EXPAND_TOOL in set(_client_tools(body)):
            return None
        offered = {**body, "tools": [*(tools or ()), TOOL]}
        view_tools = parsed.request.get("tools")
        request = {**parsed.request, "tools": [*(view_tools if isinstance(view_tools, list) else ()), VIEW_TOOL]}
        return replace(parsed, body=offered, request=request)

    def answer(self, body: dict[str, Any], after: ExpandAnswer | None) -> Answer:
        assert after is None or isinstance(after, Answer), "answer takes this format's answers"
        return Answer(body, after)

    def stream(self, after: ExpandStream | None, before: dict[str, Any] | None) -> StreamedRound:
        assert after is None or isinstance(after, StreamedRound), "stream takes this format's readers"
        return StreamedRound(after, before)

    def add_usage(self, total: dict[str, Any] | None, usage: Any) -> dict[str, Any] | None:
        return add_usage(total, usage)

    def turn_again(self, calls: Sequence[tuple[str, str]], handles: tuple[str, ...]) -> Message:
        """The round's calls; with handles, the turn as it went (app.wire.responses renders it: the items the client
        was shown, taken from its request, around the calls).
        """
        message = expand_turn(calls)
        if handles:
            message[WIRE_KEY] = {"tokens": 0, "handles": list(handles)}
        return message
