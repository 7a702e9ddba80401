"""Sending a compacted request so that it fits the model: a window the upstream publishes is asked for before the
first request of a model the proxy does not know, and a request the upstream refuses as over its context window
(`context_length_exceeded` and its kin, app.model_limits.overflow) is compacted to the window it stated and sent
again, once. Any wire format: the refusal is read from the error body, the retry is the same compaction again.

A retry happens only where nothing has reached the client yet: the refusal is an error answer, read whole before
anything is relayed. An error the proxy does not retry reaches the client byte for byte. One server refuses a
stream without a word: llama-cpp-python's answers 200 and closes the stream before its first byte. For a model
whose window is not known (assumed or merely published), a stream that ends so (or breaks off so) is asked again
unstreamed, to hear
why; a prompt that fits is then answered (and billed) once more than the client sees (docs/llama-cpp.md).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio.to_thread
import httpx
from starlette.requests import Request

from .auth import Api
from .compaction import Compacted
from .errors import ApiError
from .headers import RawHeaders, upstream_request_headers
from .model_limits import MAX_ERROR_BYTES, UpstreamModels, parse_overflow
from .model_limits.usage import prompt_tokens
from .services import Services
from .upstream import OnComplete
from .wire import WireFormat

logger = logging.getLogger("compaction_proxy.fitting")


@dataclass(frozen=True)
class Sent:
    response: httpx.Response
    compacted: Compacted  # what was sent last
    retried: bool = False


class _Replay(httpx.AsyncByteStream):
    """A body partly read already: what was read, then the rest as it comes."""

    def __init__(self, head: bytes, rest: AsyncIterator[bytes] | None, source: httpx.Response) -> None:
        self.head, self.rest, self.source = head, rest, source

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.head:
            yield self.head
        if self.rest is not None:
            async for chunk in self.rest:
                yield chunk

    async def aclose(self) -> None:
        await self.source.aclose()


def _may_be_overflow(response: httpx.Response) -> bool:
    length = response.headers.get("content-length")
    return response.status_code in (400, 413) and (
        length is None or (length.isdigit() and int(length) <= MAX_ERROR_BYTES)
    )


async def _read_error(response: httpx.Response) -> tuple[httpx.Response, bytes | None]:
    """The response to relay in its place (its body unchanged) and its decoded body, if short enough to read."""
    head = b""
    chunks = response.aiter_raw()
    async for chunk in chunks:
        head += chunk
        if len(head) > MAX_ERROR_BYTES:
            return httpx.Response(
                response.status_code, headers=response.headers.raw, stream=_Replay(head, chunks, response)
            ), None
    await response.aclose()
    replay = httpx.Response(response.status_code, headers=response.headers.raw, stream=_Replay(head, None, response))
    try:
        decoded = httpx.Response(response.status_code, headers=response.headers.raw, content=head).read()
    except httpx.DecodingError:
        return replay, None
    return replay, decoded


async def compact_known(
    request: Request, svc: Services, raw: bytes, wire: WireFormat, compacted: Compacted
) -> Compacted | None:
    """compacted, or, for the first request of a model whose window was assumed, compacted again once the upstream
    was asked what it publishes. None: the client went away meanwhile. Warns once per model left assumed.
    """
    known = svc.compactor.known
    if known is None:
        return compacted
    if compacted.undiscovered:
        # Only a format whose upstream publishes is left undiscovered (model_limits.PUBLISHING): the OpenAI one.
        headers = svc.keys.outgoing(upstream_request_headers(request.headers.raw))
        await known.discover(svc.upstream.client, svc.upstream.base_urls["openai"], headers)
        again = await svc.compactor.compact_request(request, raw, tracked=True, wire=wire)
        if again is None:
            return None
        compacted = again
    if compacted.resolved is not None and compacted.resolved.source == "assumed":
        known.warn_assumed(compacted.model)
    return compacted


async def send_fitted(
    request: Request, svc: Services, raw: bytes, wire: WireFormat, path: str, compacted: Compacted, api: Api
) -> Sent | None:
    """compacted sent upstream; when refused as too long, compacted to the stated window and sent once more.
    None: the client went away during the second compaction.
    """
    headers = upstream_request_headers(request.headers.raw)
    response = await _open(request, svc, path, headers, compacted.body, api)
    known = svc.compactor.known
    if known is None or not compacted.counted:
        return Sent(response, compacted)
    if _silent_refusal_possible(response, compacted):
        response, silent = await _peek(response)
        if silent:
            response, fits = await _ask_unstreamed(request, svc, path, headers, known, compacted, response, api)
            return await _again(request, svc, raw, wire, path, headers, compacted, response, fits, api)
    if not _may_be_overflow(response):
        return Sent(response, compacted)
    response, fits = await _learn(response, known, compacted)
    return await _again(request, svc, raw, wire, path, headers, compacted, response, fits, api)


async def _again(
    request: Request,
    svc: Services,
    raw: bytes,
    wire: WireFormat,
    path: str,
    headers: RawHeaders,
    compacted: Compacted,
    response: httpx.Response,
    fits: bool,
    api: Api,
) -> Sent | None:
    """The one retry, compacted to the window just learned (fits), unless that cuts nothing more."""
    known = svc.compactor.known
    assert known is not None
    if not fits:
        return Sent(response, compacted)
    again = await svc.compactor.compact_request(request, raw, tracked=True, wire=wire)
    if again is None:
        await response.aclose()
        return None
    if not again.counted or again.body == compacted.body:
        return Sent(response, compacted)  # nothing more to cut: the refusal stands
    await response.aclose()
    logger.info(
        "%s: refused as over the context window; compacted to %d tokens and sent again",
        wire.name,
        again.result.tokens_after,
        extra={"wire": wire.name, "tokens_after": again.result.tokens_after, "retried": True},
    )
    second = await _open(request, svc, path, headers, again.body, api)
    if again.counted and _may_be_overflow(second):
        second, _ = await _learn(second, known, again)  # learned from, not retried again
    return Sent(second, again, retried=True)


async def _open(
    request: Request, svc: Services, path: str, headers: RawHeaders, body: bytes, api: Api
) -> httpx.Response:
    return await svc.upstream.open("POST", path, query=request.url.query, headers=headers, content=body, api=api)


async def _learn(response: httpx.Response, known: UpstreamModels, compacted: Compacted) -> tuple[httpx.Response, bool]:
    """Read an error answer: the response to relay in its place, and whether it stated a window to fit to."""
    response, body = await _read_error(response)
    overflow = parse_overflow(response.status_code, body) if body is not None else None
    if overflow is None:
        return response, False
    fits = await anyio.to_thread.run_sync(
        known.learn_overflow, compacted.model, compacted.wire, overflow, compacted.counted_raw()
    )
    return response, fits


def _silent_refusal_possible(response: httpx.Response, compacted: Compacted) -> bool:
    source = compacted.resolved.source if compacted.resolved is not None else "table"
    event_stream = response.headers.get("content-type", "").startswith("text/event-stream")
    return response.status_code == 200 and event_stream and source in ("assumed", "published")


async def _peek(response: httpx.Response) -> tuple[httpx.Response, bool]:
    """The response to relay in its place (its first chunk read), and whether it ended or broke off before its first
    byte.
    """
    chunks = response.aiter_raw()
    first = b""
    try:
        while not first:  # an empty chunk says nothing yet
            first = await chunks.__anext__()
    except (StopAsyncIteration, httpx.TransportError):
        # Ended or broken off before its first byte: an empty event stream is no answer either.
        await response.aclose()
        return _broken(response), True
    replay = _Replay(first, chunks, response)
    return httpx.Response(response.status_code, headers=response.headers.raw, stream=replay), False


class _Broken(httpx.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        raise httpx.RemoteProtocolError("the upstream closed the stream before its first byte")
        yield b""  # an async generator  # pragma: no cover


def _broken(response: httpx.Response) -> httpx.Response:
    """A stand-in for a stream that broke before its first byte: relayed, it ends in the wire's error event."""
    return httpx.Response(response.status_code, headers=response.headers.raw, stream=_Broken())


async def _ask_unstreamed(
    request: Request,
    svc: Services,
    path: str,
    headers: RawHeaders,
    known: UpstreamModels,
    compacted: Compacted,
    broken: httpx.Response,
    api: Api,
) -> tuple[httpx.Response, bool]:
    """The request sent again without streaming, to hear why its stream was refused (broken: that stream, to relay
    when it was not an overflow), and whether the answer stated a window to fit to.
    """
    body = json.loads(compacted.body)
    if not isinstance(body, dict):
        return broken, False
    body["stream"] = False
    body.pop("stream_options", None)
    content = json.dumps(body).encode()
    try:
        probe = await _open(request, svc, path, headers, content, api)
    except ApiError as exc:
        if exc.code != "upstream_unreachable":
            raise
        # llama-cpp-python closes the connection just after such a stream, so the pool may hand that one out
        # again, which fails before the request is read: once more, on a fresh connection.
        probe = await _open(request, svc, path, headers, content, api)
    if not _may_be_overflow(probe):
        await probe.aclose()
        return broken, False
    probe, fits = await _learn(probe, known, compacted)
    await probe.aclose()
    return broken, fits


def usage_observer(svc: Services, compacted: Compacted) -> OnComplete | None:
    """Calibration: compares the prompt tokens the upstream's answer reports with the proxy's count of the prompt."""
    known = svc.compactor.known
    if known is None or not compacted.counted or compacted.resolved is None:
        return None
    model, wire, counted = compacted.model, compacted.wire, compacted.counted_raw()
    in_process = svc.settings.cache_in_process

    async def observe(tail: bytes) -> None:
        real = prompt_tokens(tail)
        if real is None:
            return
        if in_process:  # a dictionary update: a thread hop would cost more, on every request
            known.observe_usage(model, wire, counted, real)
        else:
            await anyio.to_thread.run_sync(known.observe_usage, model, wire, counted, real)

    return observe
