"""What a wire format is: everything that differs between the APIs the proxy compacts, behind one protocol.

A format names its routes (the client's path and its dry run's), where it goes upstream (the API family and the
path under its base URL), its error shape, how a body maps to the conversation the strategies see and back, the
fields its dry run shows, the event that ends a stream cut short, and the expand tool in its own shape (or None
where the tool is not offered). The routes are a table of these formats (app.routes.compacted): a new API is one
more format.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.settings import Api
from strategies import Message

# One call of the expand tool as the model made it: its id, its arguments as sent (app.expansion reads them)
ModelCall = tuple[Any, str]


@dataclass(frozen=True)
class Parsed:
    body: dict[str, Any]  # the whole body, as parsed
    messages: list[Message]  # the conversation the strategies see
    model: str
    request: dict[str, Any]  # the rest of the body a strategy may read (tools, max_tokens, ...)
    stdlib: bool  # read by the stdlib's parser, so written back by it (lone surrogates)
    # The request opts into the model's longer window (Anthropic's context-1m beta).
    extended_context: bool = False


class ErrorBody(Protocol):
    def __call__(
        self, status: int, message: str, *, type: str, param: str | None = None, code: str | None = None
    ) -> dict[str, Any]: ...


class ExpandRound(Protocol):
    """What one round's answer, whole or streamed, tells the expand loop."""

    def expand_calls(self) -> list[ModelCall]: ...

    def other_calls(self) -> bool:
        """Whether the model also called one of the client's tools."""
        ...

    def turn(self, kept: Sequence[tuple[str, str]]) -> Message:
        """The assistant message this round sends back upstream, in the conversation view the format renders: the
        model's turn as it made it (what the API wants back unchanged, such as signed thinking), with only the kept
        expand calls, (call id, arguments) each.
        """
        ...

    def handles(self, kept: Sequence[tuple[str, str]]) -> tuple[str, ...]:
        """What the format keeps of this round's turn (with only the kept calls) to show it again as it went on a later
        request (ExpandTool.turn_again): handles on the API's own items, never their content; () where the calls are
        all it needs (app.expansion.memory remembers them with the calls).
        """
        ...


class ExpandAnswer(ExpandRound, Protocol):
    """One round's whole (non-streamed) answer, read."""

    def for_client(self, usage: dict[str, Any] | None) -> dict[str, Any]:
        """The answer without expand calls, with the usage of every round (None: as it came)."""
        ...


class ExpandStream(ExpandRound, Protocol):
    """One round's streamed answer, event by event: what to pass to the client now, and what the round called."""

    usage: dict[str, Any] | None  # this round's, as last reported

    def feed(self, event: bytes) -> bytes | None:
        """One SSE event as received (without its blank line); the bytes to send the client now, if any."""
        ...

    def finish(self, usage: dict[str, Any] | None) -> Iterator[bytes]:
        """What the final round held back, with the usage of every round, and the stream's end."""
        ...


class ExpandTool(Protocol):
    """The expand tool in one wire format's shape: offered in a request, its calls found in answers."""

    definition: dict[str, Any]  # the tool as it is added to a request's tools

    def offer(self, parsed: Parsed) -> Parsed | None:
        """The request with the tool after the client's own, or None when its fields rule the tool out."""
        ...

    def answer(self, body: dict[str, Any], after: ExpandAnswer | None) -> ExpandAnswer:
        """A round's whole answer, read; after: the previous round's (None: this is the first round), whose output
        shown to the client the one answer goes on with.
        """
        ...

    def stream(self, after: ExpandStream | None, before: dict[str, Any] | None) -> ExpandStream:
        """A round's stream reader; after: the previous round's (None: this is the first round), whose numbering
        (ids, indices, sequence numbers) the client's one response goes on with; before: the usage of the rounds
        before it.
        """
        ...

    def add_usage(self, total: dict[str, Any] | None, usage: Any) -> dict[str, Any] | None:
        """Usage summed over rounds."""
        ...

    def turn_again(self, calls: Sequence[tuple[str, str]], handles: tuple[str, ...]) -> Message:
        """A remembered round's assistant turn, shown again on a later request (app.expansion.rounds.with_rounds): the
        same bytes as when the round was answered, from its calls and what ExpandRound.handles kept.
        """
        ...


class WireFormat(Protocol):
    name: str  # the one value naming the format: metric label `wire`, log lines
    path: str  # the route the client posts to
    dry_run_path: str  # its dry run
    api: Api  # whose upstream it goes to
    upstream_path: str  # under that upstream's base URL
    error_body: ErrorBody  # the shape of the proxy's own errors on its routes
    expand: ExpandTool | None  # None: the expand tool is not offered in this format

    def for_request(self, headers: Mapping[str, str]) -> WireFormat:
        """The format as this request's headers set it (Anthropic's betas): itself where they change nothing."""
        ...

    def parse(self, raw: bytes, max_depth: int) -> Parsed:
        """The body's conversation; a 400 ApiError when it is not one."""
        ...

    def settle(self, parsed: Parsed, messages: list[Message]) -> list[Message]:
        """The chain's messages with what this format must send whatever a strategy did put back (Anthropic: the
        latest assistant turn whole); the messages themselves when nothing needs to be. Counted as sent.
        """
        ...

    def render(self, parsed: Parsed, messages: list[Message]) -> bytes:
        """The body with these messages in place of the parsed ones."""
        ...

    def dry_run_fields(self, sent: dict[str, Any]) -> dict[str, Any]:
        """What the dry run shows of a body that would be sent: its conversation's fields, as they would go."""
        ...

    def stream_error_event(self, message: str, code: str) -> bytes:
        """The SSE event that ends a stream the upstream broke off: one the format's SDKs raise on, so a client
        never takes a cut-off answer for a whole one.
        """
        ...
