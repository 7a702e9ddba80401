"""The proxy answering the expand tool: ask the upstream, answer the model's expand calls itself, ask again.

A round is internal when the model called the expand tool and nothing else: the proxy appends the calls and their
results (app.expansion.rounds) and asks again, at most expand_max_rounds times, then once more without the tool.
Any other answer is final and goes to the client, without expand calls made beside the client's own (those are
dropped: the client's calls are what it acts on, and the stub stays for the model to expand later). The client
never sees an internal round: a whole answer comes after the last round with the usage of all of them summed
(X-Compaction-Expansions says how many there were); a streamed one passes content as it comes, round after
round, in one response (the format's ExpandTool.stream, app.wire.base).

Upstream answers are read decoded (accept-encoding: identity is asked for, as the answers are parsed); an error
answer to any round reaches the client unchanged when nothing was sent yet, else ends the stream in the wire
format's error event.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, TypeVar

import anyio
import httpx
import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from app.compaction.compactor import Compacted
from app.compaction.lanes import disconnected
from app.edge.errors import ApiError
from app.edge.headers import EXPANSIONS, RawHeaders, client_response_headers
from app.edge.metrics import EXPAND_CALL_OUTCOMES
from app.expansion import Expansion
from app.expansion.allowance import Allowance
from app.expansion.memory import ExpansionMemory
from app.expansion.rounds import Round
from app.savings.ledger import Ledger
from app.settings import Settings
from app.upstream.client import Upstream
from app.upstream.models.usage import input_usage
from app.upstream.relay import broken_stream
from app.upstream.sse import EventSplitter, EventTooLarge
from app.wire import dump_json
from app.wire.base import ExpandAnswer, ExpandRound, ExpandStream
from strategies import Message

logger = logging.getLogger("compaction_proxy.expansion")
T = TypeVar("T")


class Offered(Protocol):
    """A forwarded request the expand tool was offered on (app.forwarding.Forwarding), as the rounds use it."""

    request: Request
    headers: RawHeaders  # what goes upstream with every round
    compacted: Compacted  # what was sent last; its expansion is set

    async def send(self) -> httpx.Response | None:
        """The first round: fitted to the model's window (maybe compacted again, and so with another expansion).
        None: the client went away meanwhile.
        """
        ...

    async def open(self, body: bytes) -> httpx.Response:
        """A later round's body sent to the same upstream."""
        ...

    def response_headers(self) -> RawHeaders:
        """The X-Compaction-* headers for the client, of what was sent last."""
        ...

    async def calibrate(self, real: int) -> None:
        """The model's counts learn from the prompt tokens the upstream reports for what was sent last."""
        ...


class _ClientGone(Exception):
    """The client went away while its first round was compacted again."""


class Expander:
    def __init__(self, settings: Settings, upstream: Upstream, ledger: Ledger, memory: ExpansionMemory | None):
        self.max_rounds = settings.expand_max_rounds
        self.max_chars = settings.expand_max_chars
        self.max_calls = settings.expand_max_calls
        self.max_request_chars = settings.expand_max_request_chars
        self.max_answer_bytes = settings.max_body_bytes
        self.upstream = upstream
        self.ledger = ledger  # counts the rounds, their calls and their usage, for /metrics as for /savings
        self.metrics = ledger.metrics
        self.memory = memory

    async def forward(self, offered: Offered) -> Response:
        """Send the first round and run the rounds; the client's answer, or a 499 once it has gone."""
        # Every round's answer is parsed, so it is asked for uncompressed.
        headers = [(k, v) for k, v in offered.headers if k.lower() != b"accept-encoding"]
        offered.headers = [*headers, (b"accept-encoding", b"identity")]
        run = _Run(self, offered)
        try:
            if run.expansion.plain.body.get("stream") is True:
                return await run.stream()
            answered = await _unless_gone(offered.request, run.complete)
        except _ClientGone:
            answered = None
        return answered if answered is not None else Response(status_code=499)


class _Run:
    """The rounds of one request."""

    def __init__(self, expander: Expander, offered: Offered) -> None:
        expansion = offered.compacted.expansion
        assert expansion is not None and expansion.wire.expand is not None, "the tool was offered"
        self.x = expander
        self.offered = offered
        self.tool = expansion.wire.expand
        self.what = f"POST {expansion.wire.upstream_path}"
        self.answered = 0  # internal rounds
        self.rounds: list[Round] = []  # those to remember (every call answered whole)
        self._start(expansion)

    def _start(self, expansion: Expansion) -> None:
        """The rounds go on from this expansion's forwarded messages (the first, or a retry's)."""
        self.expansion = expansion
        self.messages: list[Message] = list(expansion.forwarded)
        self.allowance: Allowance | None = None  # made in the first round's thread: it counts the messages

    async def next_body(self, answered: ExpandRound) -> bytes | None:
        """The request again with this round answered, when its calls are the proxy's to answer; else None (the
        answer is final). Built in a thread: it counts and renders the whole conversation.
        """
        if not answered.expand_calls():
            return None
        if answered.other_calls():
            self._round("dropped")
            return None
        if self.answered >= self.x.max_rounds:
            return None  # the tool was not offered on this round: a model calling it anyway is not answered
        return await anyio.to_thread.run_sync(self._answer_round, answered)

    def _answer_round(self, round_: ExpandRound) -> bytes:
        if self.allowance is None:
            x = self.x
            self.allowance = Allowance(
                self.expansion, max_calls=x.max_calls, max_chars=x.max_chars, request_chars=x.max_request_chars
            )
        answered = self.allowance.answer(round_.expand_calls(), round_.turn)
        self.messages.extend(answered.messages)
        if answered.remembered:
            handles = round_.handles(answered.calls)
            self.rounds.append(Round(self.expansion.at, self.expansion.anchor, answered.calls, handles))
        self.answered += 1
        self._round("answered")
        wire, model = self.expansion.wire.name, self.offered.compacted.model
        for outcome in EXPAND_CALL_OUTCOMES:
            if count := getattr(answered, outcome):
                self.x.ledger.expand_calls(wire, model, outcome, count)
        logger.info(
            "expand round %d answered: %d call(s), %d left out",
            self.answered,
            len(answered.calls),
            answered.left_out,
            extra={"expand_calls": len(answered.calls), "left_out": answered.left_out, "refused": answered.refused},
        )
        if self.answered < self.x.max_rounds:
            return self.expansion.wire.render(self.expansion.offered, self.messages)
        self._round("capped")
        return self.expansion.wire.render(self.expansion.plain, self.messages)

    def _round(self, outcome: str) -> None:
        self.x.ledger.expand_round(self.expansion.wire.name, self.offered.compacted.model, outcome)

    async def _reported(self, usage: Any, first: bool) -> None:
        """One round's usage, as its answer reported it: every round is billed, the internal ones too. The first
        round's prompt is the one the proxy counted (later rounds add the calls it answered): the upstream's count of
        it calibrates the model's counts as a relayed answer's does. Without this, a request whose stubs offer the
        tool, which on a small window is every request, would never be learned from.
        """
        wire = self.expansion.wire.name
        found = input_usage(wire, usage)
        if found is None:
            return
        self.x.ledger.usage(wire, self.offered.compacted.model, found)
        if first:
            await self.offered.calibrate(found.total)

    async def remember(self) -> None:
        memory, key = self.x.memory, self.expansion.memory_key
        if memory is not None and key is not None and self.rounds:
            await anyio.to_thread.run_sync(memory.remember, key, self.rounds)

    async def open(self, body: bytes | None) -> httpx.Response:
        """The first round fitted like any request (body None); a later round's body as it is."""
        if body is not None:
            return await self.offered.open(body)
        response = await self.offered.send()
        if response is None:
            raise _ClientGone()
        expansion = self.offered.compacted.expansion
        if expansion is not None and expansion is not self.expansion:  # compacted again: its rounds go on from it
            self._start(expansion)
        return response

    # --- whole answers ----------------------------------------------------------------------------------------

    async def complete(self) -> Response:
        usage: dict[str, Any] | None = None
        body: bytes | None = None
        answer: ExpandAnswer | None = None
        while True:
            response = await self.open(body)
            extra = self.offered.response_headers()
            if response.status_code != 200 or not _is_json(response):
                return self.x.upstream.relay(response, self.what, extra + self._count(), wire=self.expansion.wire)
            try:
                raw = await self._read(response)
            except _TooLarge:
                raise ApiError(
                    502,
                    f"The upstream API's answer is larger than max_body_bytes ({self.x.max_answer_bytes}).",
                    type="upstream_error",
                    code="upstream_answer_too_large",
                ) from None
            finally:
                await response.aclose()
            try:
                data = orjson.loads(raw)
            except orjson.JSONDecodeError:
                data = None
            if not isinstance(data, dict):
                return self._answer(response, raw, extra)
            answer = self.tool.answer(data, answer)
            await self._reported(data.get("usage"), first=body is None)
            usage = self.tool.add_usage(usage, data.get("usage"))
            body = await self.next_body(answer)
            if body is not None:
                continue
            await self.remember()
            final = answer.for_client(usage if self.answered else None)
            return self._answer(response, dump_json(final), extra)

    async def _read(self, response: httpx.Response) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self.x.max_answer_bytes:
                raise _TooLarge()
            chunks.append(chunk)
        return b"".join(chunks)

    def _answer(self, response: httpx.Response, content: bytes, extra: RawHeaders) -> Response:
        out = Response(content, status_code=response.status_code)
        out.raw_headers = [*out.raw_headers, *_decoded_headers(response), *extra, *self._count()]
        return out

    def _count(self) -> RawHeaders:
        return [(EXPANSIONS, str(self.answered).encode())]

    # --- streamed answers -------------------------------------------------------------------------------------

    async def stream(self) -> Response:
        response = await self.open(None)
        extra = self.offered.response_headers()
        if response.status_code != 200 or not response.headers.get("content-type", "").startswith("text/event-stream"):
            return self.x.upstream.relay(response, self.what, extra, wire=self.expansion.wire)
        out = StreamingResponse(self._events(response), status_code=200)
        out.raw_headers = _decoded_headers(response) + extra
        return out

    async def _events(self, response: httpx.Response) -> AsyncIterator[bytes]:
        streamed: ExpandStream | None = None
        usage: dict[str, Any] | None = None
        wire = self.expansion.wire
        try:
            while True:
                streamed = self.tool.stream(streamed, usage)
                async for event in _sse_events(response.aiter_bytes(), self.x.max_answer_bytes):
                    out = streamed.feed(event)
                    if out:
                        yield out
                await response.aclose()
                await self._reported(streamed.usage, first=not self.answered)
                usage = self.tool.add_usage(usage, streamed.usage)
                body = await self.next_body(streamed)
                if body is None:
                    break
                response = await self.open(body)
                if response.status_code != 200:
                    text = (await response.aread())[:2000].decode("utf-8", "replace")
                    await response.aclose()
                    logger.warning("upstream answered %d after expand round %d", response.status_code, self.answered)
                    message = f"The upstream API answered {response.status_code} to a follow-up request: {text}"
                    yield wire.stream_error_event(message, "upstream_error")
                    return
            await self.remember()
            for chunk in streamed.finish(usage if self.answered else None):
                yield chunk
        except (httpx.TransportError, _TooLarge, EventTooLarge) as exc:
            timeout = isinstance(exc, httpx.TimeoutException)
            self.x.metrics.upstream_error("timeout" if timeout else "broken_stream")
            logger.warning("upstream stream of %s ended early during expansion: %s", self.what, type(exc).__name__)
            yield wire.stream_error_event(*broken_stream(timeout))
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()


class _TooLarge(Exception):
    """An upstream answer past max_body_bytes, which the proxy will not hold to parse."""


def _decoded_headers(response: httpx.Response) -> RawHeaders:
    """The upstream's headers for the client, of an answer the proxy decoded to read (so no content-encoding)."""
    return [(k, v) for k, v in client_response_headers(response.headers.raw) if k.lower() != b"content-encoding"]


def _is_json(response: httpx.Response) -> bool:
    return str(response.headers.get("content-type", "")).startswith("application/json")


async def _sse_events(chunks: AsyncIterator[bytes], limit: int) -> AsyncIterator[bytes]:
    """The events of an SSE stream, each without the blank line that ends it."""
    splitter = EventSplitter(limit)
    async for chunk in chunks:
        for event in splitter.feed(chunk):
            yield event
    rest = splitter.rest()
    if rest is not None:
        yield rest


async def _unless_gone(request: Request, work: Callable[[], Awaitable[T]]) -> T | None:
    """await work(), or None once the client goes away (the rounds stop: nobody would read them)."""
    result: list[T] = []
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            await disconnected(request)
            group.cancel_scope.cancel()

        group.start_soon(watch)
        result.append(await work())
        group.cancel_scope.cancel()
    return result[0] if result else None
