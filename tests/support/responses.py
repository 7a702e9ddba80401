"""The Responses API for the tests: checks of an `input` as the API reads it, and a scripted stand-in model.

The stand-in (ScriptedResponses) answers POST /v1/responses whole or streamed in the API's event grammar, each answer
a reasoning item (a summary and encrypted content of its own), then text, then function calls, as a script says. It
remembers every item it produced, so a test can check that what comes back is what it made: `input_problems` holds
a later input to the API's rules (calls and outputs paired; each reasoning item as the model made it, directly
followed by the item that followed it; a call or message the model made after reasoning, with that reasoning
right before it).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

USAGE = {
    "input_tokens": 100,
    "input_tokens_details": {"cached_tokens": 40},
    "output_tokens": 10,
    "output_tokens_details": {"reasoning_tokens": 4},
    "total_tokens": 110,
}


def pairing_problems(items: list[dict[str, Any]]) -> list[str]:
    """Calls without an output after them and outputs that answer no call before them, by call_id."""
    problems: list[str] = []
    open_calls: set[str] = set()
    answered: set[str] = set()
    for index, item in enumerate(items):
        kind = item.get("type", "")
        if kind.endswith("_call"):
            open_calls.add(item["call_id"])
        elif kind.endswith("_call_output"):
            if item["call_id"] not in open_calls:
                problems.append(f"input[{index}]: output {item['call_id']} answers no call before it")
            answered.add(item["call_id"])
    problems += [f"call {c} has no output" for c in sorted(open_calls - answered)]
    return problems


def reasoning_problems(items: list[dict[str, Any]], produced: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Against what the model produced (its outputs, keyed by response id): each reasoning item as it was made, keys
    and values (a client may add keys of its own), directly followed by the item that followed it; each item the
    model made right after a reasoning item, when it comes back with its id, right after that reasoning item.
    """
    after: dict[str, dict[str, Any]] = {}  # reasoning id -> the item after it
    before: dict[str, str] = {}  # item id -> the reasoning right before it
    made: dict[str, dict[str, Any]] = {}
    for output in produced.values():
        for first, second in zip(output, output[1:], strict=False):
            if first.get("type") == "reasoning":
                after[first["id"]] = second
                before[second["id"]] = first["id"]
        made.update((item["id"], item) for item in output if item.get("type") == "reasoning")
    problems: list[str] = []
    for index, item in enumerate(items):
        item_id = item.get("id")
        following = items[index + 1] if index + 1 < len(items) else {}
        if item.get("type") == "reasoning" and item_id in made:
            if {key: item.get(key) for key in made[item_id]} != made[item_id]:
                problems.append(f"input[{index}]: reasoning {item_id} is not as the model made it")
            expected = after.get(item_id)
            if expected is not None and following.get("id") != expected["id"]:
                problems.append(f"input[{index}]: reasoning {item_id} is not followed by {expected['id']}")
        if item_id in before:
            preceding = items[index - 1] if index else {}
            if preceding.get("id") != before[item_id]:
                problems.append(f"input[{index}]: {item_id} without its reasoning {before[item_id]} before it")
    return problems


@dataclass
class Turn:
    """What the model does on one request: reason, say text, then call functions ((call_id, name, arguments))."""

    text: str | None = None
    calls: list[tuple[str, str, str]] = field(default_factory=list)
    reasoning: bool = True
    status: int = 200  # anything else: an error answer in OpenAI's shape


Script = Callable[[dict[str, Any]], Turn]


class ScriptedResponses:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.received: list[dict[str, Any]] = []
        self.produced: dict[str, list[dict[str, Any]]] = {}  # response id -> its output
        self.app = Starlette(routes=[Route("/v1/responses", self.handle, methods=["POST"])])
        self.url = ""

    def problems(self, items: list[dict[str, Any]]) -> list[str]:
        return pairing_problems(items) + reasoning_problems(items, self.produced)

    async def handle(self, request: Request) -> Response:
        payload = json.loads(await request.body())
        self.received.append(payload)
        turn = self.script(payload)
        n = len(self.received)
        if turn.status != 200:
            error = {"message": f"scripted failure {turn.status}", "type": "server_error", "param": None, "code": None}
            return JSONResponse({"error": error}, turn.status)
        response = self.response(payload, turn, n)
        self.produced[response["id"]] = response["output"]
        if payload.get("stream"):
            return StreamingResponse(self.events(response), media_type="text/event-stream")
        return JSONResponse(response)

    def response(self, payload: dict[str, Any], turn: Turn, n: int) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        if turn.reasoning:
            summary = [{"type": "summary_text", "text": f"Thinking over request {n}."}]
            output.append(
                {"id": f"rs_{n}", "type": "reasoning", "summary": summary, "encrypted_content": f"enc{n}" * 20}
            )
        if turn.text is not None:
            content = [{"type": "output_text", "text": turn.text, "annotations": [], "logprobs": []}]
            output.append({"id": f"msg_{n}", "type": "message", "status": "completed", "role": "assistant",
                           "content": content})  # fmt: skip
        for k, (call_id, name, arguments) in enumerate(turn.calls):
            output.append({"id": f"fc_{n}_{k}", "type": "function_call", "status": "completed", "arguments": arguments,
                           "call_id": call_id, "name": name})  # fmt: skip
        return {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": 1_700_000_000 + n,
            "status": "completed",
            "model": payload.get("model"),
            "output": output,
            "parallel_tool_calls": payload.get("parallel_tool_calls", True),
            "previous_response_id": None,
            "store": payload.get("store", True),
            "tool_choice": payload.get("tool_choice", "auto"),
            "tools": payload.get("tools") or [],
            "usage": USAGE,
            "error": None,
            "incomplete_details": None,
        }

    async def events(self, response: dict[str, Any]) -> AsyncIterator[bytes]:
        for number, event in enumerate(stream_events(response)):
            yield f"event: {event['type']}\ndata: {json.dumps({**event, 'sequence_number': number})}\n\n".encode()


def stream_events(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A whole response as the API streams it: created, in_progress, each item added, its deltas, done, completed."""
    started = {**response, "status": "in_progress", "output": [], "usage": None}
    yield {"type": "response.created", "response": started}
    yield {"type": "response.in_progress", "response": started}
    for index, item in enumerate(response["output"]):
        at = {"item_id": item["id"], "output_index": index}
        if item["type"] == "reasoning":
            yield {"type": "response.output_item.added", "output_index": index,
                   "item": {"id": item["id"], "type": "reasoning", "summary": []}}  # fmt: skip
            for k, summary in enumerate(item["summary"]):
                text = summary["text"]
                yield {"type": "response.reasoning_summary_part.added", **at, "summary_index": k,
                       "part": {"type": "summary_text", "text": ""}}  # fmt: skip
                for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                    yield {"type": "response.reasoning_summary_text.delta", **at, "summary_index": k, "delta": piece}
                yield {"type": "response.reasoning_summary_text.done", **at, "summary_index": k, "text": text}
                yield {"type": "response.reasoning_summary_part.done", **at, "summary_index": k,
                       "part": {"type": "summary_text", "text": text}}  # fmt: skip
        elif item["type"] == "message":
            yield {"type": "response.output_item.added", "output_index": index,
                   "item": {**item, "status": "in_progress", "content": []}}  # fmt: skip
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            yield {"type": "response.content_part.added", **at, "content_index": 0, "part": part}
            text = item["content"][0]["text"]
            for word in text.split(" "):
                yield {"type": "response.output_text.delta", **at, "content_index": 0, "delta": word + " ",
                       "logprobs": []}  # fmt: skip
            yield {"type": "response.output_text.done", **at, "content_index": 0, "text": text, "logprobs": []}
            yield {"type": "response.content_part.done", **at, "content_index": 0, "part": item["content"][0]}
        else:
            yield {"type": "response.output_item.added", "output_index": index,
                   "item": {**item, "status": "in_progress", "arguments": ""}}  # fmt: skip
            arguments = item["arguments"]
            for piece in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
                yield {"type": "response.function_call_arguments.delta", **at, "delta": piece}
            yield {"type": "response.function_call_arguments.done", **at, "arguments": arguments}
        yield {"type": "response.output_item.done", "output_index": index, "item": item}
    yield {"type": "response.completed", "response": response}
