"""The soak's upstream: the canned chat completion (bench/canned.py), as JSON or as a stream, as the body asks.

    python -m bench.soak.upstream PORT

nginx serves the same answers to the overhead benchmark, but it cannot look into a request body, so it needs a
base URL per kind of answer; the soak sends plain and streamed requests through one proxy, whose one upstream
must answer both. A process of its own under uvicorn, so its work is never counted as the proxy's. Streams go
out an event at a time, as a model's do, so that the proxy relays each as it comes.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ..canned import completion_events, completion_json


def app() -> Starlette:
    plain = completion_json().encode()
    streams = {usage: [event.encode() for event in completion_events(usage)] for usage in (False, True)}

    async def chat_completions(request: Request) -> Response:
        body = json.loads(await request.body())
        if not body.get("stream"):
            return Response(plain, media_type="application/json")
        options = body.get("stream_options")
        events = streams[isinstance(options, dict) and bool(options.get("include_usage"))]

        async def send() -> AsyncIterator[bytes]:
            for event in events:
                yield event

        return StreamingResponse(send(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat_completions, methods=["POST"])])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.soak.upstream", description=__doc__.split("\n\n")[0])
    parser.add_argument("port", type=int, help="loopback port to listen on")
    args = parser.parse_args(argv)
    uvicorn.run(app(), host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
