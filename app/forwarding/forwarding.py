"""One forwarded request, built once from the request, the services, its raw body and its wire format: it compacts
the body, learns the model's window, sends, retries once on a context-length refusal and relays the answer. The
expand loop (app.expansion.loop) receives it and sends its rounds through it.

Fitting the model: a window the upstream publishes is asked for before the first request of a model the proxy does
not know, and a request the upstream refuses as over its context window (`context_length_exceeded` and its kin,
app.upstream.models.overflow) is compacted to the window it stated and sent again, once. Any wire format: the
refusal is read from the error body, the retry is the same compaction again.

A retry happens only where nothing has reached the client yet: the refusal is an error answer, read whole before
anything is relayed. An error the proxy does not retry reaches the client byte for byte. One server refuses a
stream without a word: llama-cpp-python's answers 200 and closes the stream before its first byte. For a model
whose window is not known (assumed or merely published) or was learned from such a refusal, a stream that ends so
(or breaks off so) is asked again unstreamed, to hear why; a prompt that fits is then answered (and billed) once
more than the client sees (docs/llama-cpp.md). A refusal of a request compacted for the window it states (the
counts, calibrated, were off by more than the safety margin) is retried too, compacted below that window by what
the refusal says the prompt was over.
"""

from __future__ import annotations

import json
import logging
import math

import anyio.to_thread
import httpx
from starlette.requests import Request
from starlette.responses import Response

from app.compaction.compactor import Compacted
from app.edge.body import read_body
from app.edge.errors import ApiError
from app.edge.headers import RETRIED, RawHeaders, upstream_request_headers
from app.edge.request_id import request_id
from app.forwarding.refusals import is_event_stream, may_be_overflow, peek, read_error
from app.services import Services
from app.upstream.models import UpstreamModels, parse_overflow
from app.upstream.models.usage import usage_in_body
from app.wire import WireFormat

logger = logging.getLogger("compaction_proxy.fitting")


def client_gone() -> Response:
    # What nginx logs for a client that closed the connection before the answer: nobody reads this one.
    return Response(status_code=499)


class Forwarding:
    """compacted: what was sent last (set by compact, replaced by a retry); retried: the request was sent again."""

    compacted: Compacted

    def __init__(self, request: Request, services: Services, raw: bytes, wire: WireFormat) -> None:
        self.request = request
        self.services = services
        self.raw = raw
        self.wire = wire
        self.headers: RawHeaders = upstream_request_headers(request.headers.raw)
        self.retried = False
        self.refused_prompt: int | None = None  # the prompt's size in the upstream's tokens, as its refusal stated
        # The log line names the API as it always has: compaction_proxy.chat, .responses, .messages.
        self.logger = logging.getLogger(f"compaction_proxy.{wire.upstream_path.split('/', 1)[0]}")

    @classmethod
    async def read(cls, request: Request, services: Services, wire: WireFormat) -> Forwarding:
        """The request with its body read (within max_body_bytes)."""
        return cls(request, services, await read_body(request, services.settings.max_body_bytes), wire)

    @property
    def models(self) -> UpstreamModels | None:
        return self.services.upstream_models

    async def respond(self) -> Response:
        """The whole of it: compacted, sent, the answer relayed (through the expand loop when the tool was offered)."""
        if not await self.compact():
            return client_gone()
        if self.compacted.expansion is not None:
            self._report(None)
            return await self.services.expander.forward(self)
        response = await self.send()
        if response is None:
            return client_gone()
        self._report(response.status_code)
        return self.relay(response)

    async def compact(self) -> bool:
        """Compact the body, for the first request of a model whose window was assumed once more after the upstream
        was asked what it publishes. False: the client went away meanwhile. Warns once per model left assumed.
        """
        compacted = await self._compact()
        if compacted is None:
            return False
        models = self.models
        if models is not None and compacted.undiscovered:
            # Only a format whose upstream publishes is left undiscovered (upstream.models.PUBLISHING): OpenAI's.
            upstream = self.services.upstream
            await models.discover(
                upstream.client, upstream.base_urls["openai"], self.services.keys.outgoing(self.headers)
            )
            compacted = await self._compact()
            if compacted is None:
                return False
        if models is not None and compacted.resolved is not None and compacted.resolved.source == "assumed":
            models.warn_assumed(compacted.model)
        self.compacted = compacted
        return True

    async def _compact(self, window: int | None = None) -> Compacted | None:
        compactor = self.services.compactor
        return await compactor.compact_request(self.request, self.raw, self.wire, tracked=True, window=window)

    async def open(self, body: bytes) -> httpx.Response:
        """body sent to the format's upstream path with the client's query and headers; its answer not yet read."""
        upstream = self.services.upstream
        query = self.request.url.query
        path, api = self.wire.upstream_path, self.wire.api
        return await upstream.open("POST", path, query=query, headers=self.headers, content=body, api=api)

    async def send(self) -> httpx.Response | None:
        """The compacted body sent; when refused as too long, compacted to the stated window and sent once more.
        None: the client went away during the second compaction.
        """
        response = await self.open(self.compacted.body)
        if self.models is None or not self.compacted.counted:
            return response
        if self._silent_refusal_possible(response):
            response, silent = await peek(response)
            if silent:
                response, window = await self._ask_unstreamed(response)
                return await self._again(response, window)
        if not may_be_overflow(response):
            return response
        response, window = await self._learn(response)
        return await self._again(response, window)

    async def _again(self, response: httpx.Response, window: int | None) -> httpx.Response | None:
        """The one retry, compacted to the window the refusal stated, unless that cuts nothing more."""
        if window is None:
            return response
        again = await self._compact(window)
        below = self._shortfall(again, window) if again is not None else 0
        if below:
            again = await self._compact(window - below)
        if again is None:
            await response.aclose()
            return None
        if not again.counted or again.body == self.compacted.body:
            return response  # nothing more to cut: the refusal stands
        await response.aclose()
        name, tokens = self.wire.name, again.result.tokens_after
        logger.info(
            "%s: refused as over the context window; compacted to %d tokens and sent again",
            name,
            tokens,
            extra={"wire": name, "tokens_after": tokens, "retried": True},
        )
        self.compacted, self.retried = again, True
        second = await self.open(again.body)
        if may_be_overflow(second):
            second, _ = await self._learn(second)  # learned from, not retried again
        return second

    def _shortfall(self, again: Compacted, window: int) -> int:
        """How far below `window` the retry must go, when the refused request was compacted for that window already:
        its counts, calibrated, were off by more than the safety margin (one learned ratio cannot follow every prompt,
        and the upstream counts what it pleases). By what the refusal says the prompt was over the count the retry's
        calibration makes of it, at least the margin, and then so far only if the retry would be the refused body
        again. 0: the window was not known, or the retry's calibration accounts for it.
        """
        compacted = self.compacted
        resolved = compacted.resolved
        if resolved is None or resolved.limits.context_window > window or not again.counted:
            return 0
        calibration = again.resolved.calibration if again.resolved is not None else resolved.calibration
        under = (self.refused_prompt or 0) - round(compacted.counted_raw() * calibration)
        if under <= 0 and again.body != compacted.body:
            return 0
        margin = math.ceil(window * self.services.settings.safety_margin_percent / 100)
        return min(window - 1, max(1, margin, under))

    async def _learn(self, response: httpx.Response) -> tuple[httpx.Response, int | None]:
        """Read an error answer: the response to relay in its place, and the window it stated to fit to."""
        assert self.models is not None
        response, body = await read_error(response)
        overflow = parse_overflow(response.status_code, body) if body is not None else None
        compacted = self.compacted
        if overflow is None or compacted.resolved is None:
            return response, None
        self.refused_prompt = overflow.prompt_tokens
        learn = self.models.learn_overflow
        window = await anyio.to_thread.run_sync(learn, compacted.resolved, overflow, compacted.counted_raw())
        if overflow.limit is not None and window is not None:
            self.services.ledger.learned_window(self.wire.name, compacted.model, window)
        return response, window

    def _silent_refusal_possible(self, response: httpx.Response) -> bool:
        resolved = self.compacted.resolved
        # A learned window too: it came from a refusal, so this upstream refuses, and a count calibrated since may
        # still be off by more than the margin.
        sources = ("assumed", "published", "learned")
        return is_event_stream(response) and resolved is not None and resolved.source in sources

    async def _ask_unstreamed(self, broken: httpx.Response) -> tuple[httpx.Response, int | None]:
        """The request sent again without streaming, to hear why its stream was refused (broken: that stream, to relay
        when it was not an overflow), and the window the answer stated to fit to.
        """
        body = json.loads(self.compacted.body)
        if not isinstance(body, dict):
            return broken, None
        body["stream"] = False
        body.pop("stream_options", None)
        content = json.dumps(body).encode()
        try:
            probe = await self.open(content)
        except ApiError as exc:
            if exc.code != "upstream_unreachable":
                raise
            # llama-cpp-python closes the connection just after such a stream, so the pool may hand that one out
            # again, which fails before the request is read: once more, on a fresh connection.
            probe = await self.open(content)
        if not may_be_overflow(probe):
            await probe.aclose()
            return broken, None
        probe, window = await self._learn(probe)
        await probe.aclose()
        return broken, window

    def response_headers(self) -> RawHeaders:
        """The X-Compaction-* headers for the client, of what was sent last."""
        retried = [(RETRIED, b"context_length_exceeded")] if self.retried else []
        return self.compacted.response_headers() + retried

    def relay(self, response: httpx.Response) -> Response:
        """The upstream's answer relayed as it comes; a whole one's usage goes to the savings ledger and calibrates
        the model's counts.
        """
        observe = self._observe_usage if response.status_code == 200 else None
        what = f"POST {self.wire.upstream_path}"
        headers = self.response_headers()
        return self.services.upstream.relay(response, what, headers, wire=self.wire, on_complete=observe)

    async def _observe_usage(self, tail: bytes) -> None:
        """The input the upstream's answer reports, for the savings ledger and the calibration."""
        usage = usage_in_body(self.wire.name, tail)
        if usage is not None:
            self.services.ledger.usage(self.wire.name, self.compacted.model, usage)
            await self.calibrate(usage.total)

    async def calibrate(self, real: int) -> None:
        """The prompt tokens the upstream reports for what was sent last (every kind of input: what the prompt
        cache read or wrote is prompt too), against the proxy's count of that prompt: the model's counts learn
        from it.
        """
        models, compacted = self.models, self.compacted
        if models is None or not compacted.counted or compacted.resolved is None:
            return
        resolved, counted = compacted.resolved, compacted.counted_raw()
        if self.services.settings.cache_in_process:  # a dictionary update: a thread hop would cost more
            models.observe_usage(resolved, counted, real)
        else:
            await anyio.to_thread.run_sync(models.observe_usage, resolved, counted, real)

    def _report(self, upstream_status: int | None) -> None:
        """Metrics and the one log line of what compaction did; upstream_status None: the proxy answers the expand
        rounds first.
        """
        compacted, wire = self.compacted, self.wire.name
        self.services.ledger.compacted(compacted, wire)
        result = compacted.result
        if self.services.inspect is not None:
            self.services.inspect.record(
                compacted.inspection,
                request_id=request_id.get(),
                wire=wire,
                model=compacted.model,
                chain=compacted.chain.spec,
                tokens=(result.tokens_before, result.tokens_after) if compacted.counted else None,
                fallback=compacted.fallback,
                retried=self.retried,
            )
        self.logger.info(
            "%s chain=%s tokens=%d->%d upstream_status=%s",
            wire,
            compacted.chain.spec,
            result.tokens_before,
            result.tokens_after,
            "expand" if upstream_status is None else upstream_status,
            extra={
                "wire": wire,
                "chain": compacted.chain.spec,
                "tokens_before": result.tokens_before,
                "tokens_after": result.tokens_after,
                "upstream_status": upstream_status,
                "fallback": compacted.fallback,
                "prefix": compacted.prefix,
                "expand_offered": compacted.expansion is not None,
                "retried": self.retried,
            },
        )
