"""What every wire format gives the Compactor, and takes back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from strategies import Message


@dataclass(frozen=True)
class Parsed:
    body: dict[str, Any]  # the whole body, as parsed
    messages: list[Message]  # the conversation the strategies see
    model: str
    request: dict[str, Any]  # the rest of the body a strategy may read (tools, max_tokens, ...)
    stdlib: bool  # read by the stdlib's parser, so written back by it (lone surrogates)
    # The request opts into the model's longer window (Anthropic's context-1m beta).
    extended_context: bool = False


class WireFormat(Protocol):
    name: str

    def parse(self, raw: bytes, max_depth: int) -> Parsed:
        """The body's conversation; a 400 ApiError in the format's own shape when it is not one."""
        ...

    def settle(self, parsed: Parsed, messages: list[Message]) -> list[Message]:
        """The chain's messages with what this format must send whatever a strategy did put back (Anthropic: the
        latest assistant turn whole); the messages themselves when nothing needs to be. Counted as sent.
        """
        ...

    def render(self, parsed: Parsed, messages: list[Message]) -> bytes:
        """The body with these messages in place of the parsed ones."""
        ...

    def stream_error_event(self, message: str, code: str) -> bytes:
        """The SSE event that ends a stream the upstream broke off: one the format's SDKs raise on, so a client
        never takes a cut-off answer for a whole one.
        """
        ...
