"""The notes strategy's summariser: one non-streaming chat completion, on the app's pooled httpx client.

The strategy runs in a worker thread and calls summarise() synchronously; the HTTP call itself runs on the
event loop (anyio.from_thread.run), so there is one loop and one connection pool, whoever asks.

Each request gets its own summariser: at most summariser_max_calls calls, each within what is left of the
request's compaction deadline, and cancelled with it when the client goes away.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import anyio
import anyio.from_thread
import httpx
import orjson

from app.edge.headers import INTERNAL, STRATEGIES, RawHeaders
from app.policy.keys import Keys
from app.settings import Settings
from strategies import Message, ModelTable
from strategies.context import Deadline
from strategies.conversation import text_of
from strategies.notes_io import SUMMARISER_ERROR, SUMMARISER_LIMIT, SUMMARISER_TIMEOUT, NotesUnavailable

logger = logging.getLogger("compaction_proxy.summariser")
# Marks the call, so that a proxy receiving it (this one, if the summariser URL points back at it, or another
# one in front of the model) forwards it uncompacted instead of summarising the summariser's input.
MARKERS: RawHeaders = [(STRATEGIES, b"none"), (INTERNAL, b"summariser")]
# The client's credentials that go with a summariser call made on its behalf.
_CREDENTIALS = (b"authorization", b"openai-organization", b"openai-project")


class Summarisers:
    """Makes the summariser for one request: with the request's own credentials, unless a summariser key is set."""

    def __init__(
        self,
        settings: Settings,
        keys: Keys,
        models: ModelTable,
        client: httpx.AsyncClient,
        record: Callable[[str], None] = lambda outcome: None,
    ) -> None:
        self.url = (settings.summariser_base_url or settings.upstream_base_url) + "/chat/completions"
        self.key = settings.summariser_api_key.get_secret_value().strip()
        self.default_model = settings.summariser_model or None
        self.timeout = settings.summariser_timeout
        self.max_calls = settings.summariser_max_calls
        self.keys = keys
        self.models = models
        self.client = client
        self.record = record

    def for_request(self, headers: RawHeaders, deadline: Deadline | None = None) -> UpstreamSummariser:
        if self.key:
            sent: RawHeaders = [(b"authorization", f"Bearer {self.key}".encode())]
        else:
            # The same Authorization as the request gets upstream: the client's, or in proxy-keys mode the
            # upstream key (never the proxy key the client presented).
            sent = self.keys.outgoing([(name, value) for name, value in headers if name.lower() in _CREDENTIALS])
        return UpstreamSummariser(self, [*sent, (b"content-type", b"application/json"), *MARKERS], deadline)


class UpstreamSummariser:
    def __init__(self, factory: Summarisers, headers: RawHeaders, deadline: Deadline | None = None) -> None:
        self.factory = factory
        self.headers = headers
        self.deadline = deadline
        self._calls_left = factory.max_calls
        self._lock = threading.Lock()  # the request's thread and a fold ahead of need may call at once

    @property
    def default_model(self) -> str | None:
        return self.factory.default_model

    def context_window(self, model: str) -> int:
        return self.factory.models.lookup(model).context_window

    def summarise(self, messages: list[Message], model: str) -> str:
        with self._lock:
            if self._calls_left <= 0:
                raise NotesUnavailable(SUMMARISER_LIMIT, f"{self.factory.max_calls} calls per request")
            self._calls_left -= 1
        return anyio.from_thread.run(self._complete, messages, model)

    async def _complete(self, messages: list[Message], model: str) -> str:
        factory = self.factory
        remaining = self.deadline.remaining() if self.deadline is not None else None
        timeout = factory.timeout if remaining is None else min(factory.timeout, remaining)
        # No max_tokens: reasoning models refuse it and others call it max_completion_tokens; the prompt
        # bounds the length, and the notes' tokens are counted like any message's.
        body = orjson.dumps({"model": model, "messages": messages, "stream": False})
        with anyio.CancelScope() as scope:
            forget = self.deadline.on_cancel(scope.cancel) if self.deadline is not None else None
            try:
                response = await self._post(body, timeout)
            finally:
                if forget is not None:
                    forget()
        if scope.cancelled_caught:
            raise NotesUnavailable(SUMMARISER_ERROR, "cancelled: the client went away")
        if response.status_code != 200:
            factory.record("error")
            logger.warning("summariser answered HTTP %d", response.status_code)
            raise NotesUnavailable(SUMMARISER_ERROR, f"HTTP {response.status_code}")
        try:
            content = orjson.loads(response.content)["choices"][0]["message"]["content"]
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
            factory.record("error")
            logger.warning("summariser answer is not a chat completion")
            raise NotesUnavailable(SUMMARISER_ERROR, "not a chat completion") from None
        factory.record("ok")
        return text_of(content)

    async def _post(self, body: bytes, timeout: float) -> httpx.Response:
        factory = self.factory
        try:
            with anyio.fail_after(timeout):
                return await factory.client.post(factory.url, content=body, headers=self.headers, timeout=timeout)
        except (TimeoutError, httpx.TimeoutException) as exc:
            factory.record("timeout")
            logger.warning("summariser call timed out after %gs (%s)", timeout, type(exc).__name__)
            raise NotesUnavailable(SUMMARISER_TIMEOUT, f"no answer in {timeout:g} s") from None
        except httpx.TransportError as exc:
            factory.record("error")
            logger.warning("summariser unreachable: %s", type(exc).__name__)
            raise NotesUnavailable(SUMMARISER_ERROR, type(exc).__name__) from None
