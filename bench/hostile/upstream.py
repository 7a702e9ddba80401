"""The hostile benchmark's model: floods the expand tool, as a buggy or prompt-injected model may.

    python -m bench.hostile.upstream PORT

A chat completion whose tools include the expand tool is answered with `calls` parallel calls of it, all on the
ref of the oldest stub in the messages (every call the same, or with `lines` each asking for a line of its own, so
that no two are alike); any other (the tool not offered: the proxy's last round), or any with `calls` 0, is
answered in words (bench/canned.py). Whole or streamed, as the body asks. It records the size of every body it
receives, so the benchmark reads what each round sent upstream:

    POST /flood {"calls": N, "lines": false}    the calls of the answers from now on (0: words); clears the record
    GET /stats      {"requests": [{"bytes", "offered", "answer", "answer_bytes"}, ...]} since the last /flood:
                    each body's size, whether it offered the tool, how it was answered and with how many bytes

A process of its own under uvicorn, so its work is never counted as the proxy's.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from strategies.refs import EXPAND_TOOL, refs_in

from ..canned import MODEL, USAGE, completion_events, completion_json

_ID, _CREATED = "chatcmpl-hostile01", 1700000000
EVENTS_PER_WRITE = 64  # a stream goes out in writes of this many events: the stand-in stays cheap at 8,000 calls


def _dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"))


def oldest_ref(messages: object) -> str | None:
    """The ref of the first stub in the messages, in order."""
    if not isinstance(messages, list):
        return None
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        text = content if isinstance(content, str) else json.dumps(content)
        if found := refs_in(text):
            return found[0]
    return None


def offers_expand(body: dict[str, Any]) -> bool:
    tools = body.get("tools")
    return isinstance(tools, list) and any(
        isinstance(t, dict) and isinstance(t.get("function"), dict) and t["function"].get("name") == EXPAND_TOOL
        for t in tools
    )


def _calls(ref: str, count: int, lines: bool) -> list[dict[str, Any]]:
    def arguments(i: int) -> str:
        return json.dumps({"ref": ref, "start_line": i + 1, "end_line": i + 1} if lines else {"ref": ref})

    return [
        {"id": f"call_flood_{i:05d}", "type": "function", "function": {"name": EXPAND_TOOL, "arguments": arguments(i)}}
        for i in range(count)
    ]


def flood_json(ref: str, count: int, lines: bool) -> str:
    """A whole answer holding `count` calls of the expand tool on `ref`."""
    message = {"role": "assistant", "content": None, "tool_calls": _calls(ref, count, lines)}
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls"}
    base = {"id": _ID, "object": "chat.completion", "created": _CREATED, "model": MODEL}
    return _dumps({**base, "choices": [choice], "usage": USAGE})


def flood_events(ref: str, count: int, lines: bool, include_usage: bool) -> list[str]:
    """The same answer streamed as OpenAI streams parallel calls: a role chunk, one chunk per call (its index, id,
    name and whole arguments), the finish chunk, the usage chunk when asked for, [DONE].
    """

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> str:
        base = {"id": _ID, "object": "chat.completion.chunk", "created": _CREATED, "model": MODEL}
        return f"data: {_dumps({**base, 'choices': choices, **extra})}\n\n"

    def delta(content: dict[str, Any], finish: str | None = None) -> str:
        return chunk([{"index": 0, "delta": content, "logprobs": None, "finish_reason": finish}])

    events = [delta({"role": "assistant", "content": None})]
    events += [
        delta({"tool_calls": [{"index": index, **call}]}) for index, call in enumerate(_calls(ref, count, lines))
    ]
    events.append(delta({}, "tool_calls"))
    if include_usage:
        events.append(chunk([], usage=USAGE))
    return [*events, "data: [DONE]\n\n"]


def answer_writes(ref: str | None, calls: int, lines: bool, stream: bool, options: object) -> list[bytes]:
    """The answer as it goes out: the flood on `ref` (None: words), whole or as writes of EVENTS_PER_WRITE events."""
    if not stream:
        return [(completion_json() if ref is None else flood_json(ref, calls, lines)).encode()]
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    events = completion_events(include_usage) if ref is None else flood_events(ref, calls, lines, include_usage)
    return ["".join(events[i : i + EVENTS_PER_WRITE]).encode() for i in range(0, len(events), EVENTS_PER_WRITE)]


def app() -> Starlette:
    state: dict[str, Any] = {"calls": 0, "lines": False, "requests": []}

    async def flood(request: Request) -> Response:
        asked = await request.json()
        state.update(calls=int(asked["calls"]), lines=bool(asked.get("lines")), requests=[])
        return JSONResponse({"calls": state["calls"], "lines": state["lines"]})

    async def stats(request: Request) -> Response:
        return JSONResponse({"requests": state["requests"]})

    async def chat_completions(request: Request) -> Response:
        raw = await request.body()
        body = json.loads(raw)
        offered = offers_expand(body)
        ref = oldest_ref(body.get("messages")) if offered and state["calls"] else None
        stream = body.get("stream") is True
        writes = answer_writes(ref, state["calls"], state["lines"], stream, body.get("stream_options"))
        answer = "flood" if ref else "words"
        record = {"bytes": len(raw), "offered": offered, "answer": answer, "answer_bytes": sum(map(len, writes))}
        state["requests"].append(record)
        if not stream:
            return Response(writes[0], media_type="application/json")

        async def send() -> AsyncIterator[bytes]:
            for write in writes:
                yield write

        return StreamingResponse(send(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/flood", flood, methods=["POST"]),
            Route("/stats", stats, methods=["GET"]),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile.upstream", description=__doc__.split("\n\n")[0])
    parser.add_argument("port", type=int, help="loopback port to listen on")
    args = parser.parse_args(argv)
    uvicorn.run(app(), host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
