"""What a strategy may know about a request besides its messages, the services it may use, and when its work must
stop: its deadline passed, its client went away, or the proxy is stopping.

Strategies run in a worker thread, which nothing can interrupt from outside; they call Context.checkpoint() in
their loops, which raises CompactionStopped once the Deadline says so. Cheap enough for every loop: the clock is
read once every CLOCK_EVERY calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .digests import message_digest
from .messages import REPLY_PRIMING, Message
from .models import DEFAULT_LIMITS, ModelLimits
from .refs import stands_for

CLOCK_EVERY = 64
MAX_REWRITES = 8  # lossless rewrites of one text in a chain (minify twice, say); a cycle stops here
# Held back from the context window by default: counts are estimates (strategies.budget.safety_margin).
SAFETY_MARGIN_PERCENT = 2.0
Reason = Literal["deadline", "cancelled"]


class CompactionStopped(Exception):
    """Raised from a checkpoint: `deadline` (the request goes on uncompacted) or `cancelled` (nobody waits)."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(reason)
        self.reason: Reason = reason


class Deadline:
    def __init__(self, seconds: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        """seconds: from now; None: no deadline, only cancel() stops the work."""
        self.clock = clock
        self.at = clock() + seconds if seconds is not None else None
        self.cancelled = self.finished = False
        self._calls = 0
        self._on_cancel: list[Callable[[], None]] = []

    def remaining(self) -> float | None:
        return None if self.at is None else max(0.0, self.at - self.clock())

    def finish(self) -> None:
        """The request's compaction is over: what it started in the background (notes made ahead of need) is
        bounded by its own timeouts from now on, not by this deadline.
        """
        self.at = None
        self._on_cancel = []
        self.finished = True

    def expired(self) -> bool:
        return self.at is not None and self.clock() >= self.at

    def cancel(self) -> None:
        """Stop the work at its next checkpoint, and run what was registered (e.g. cancel a pending call)."""
        if self.finished:
            return
        self.cancelled = True
        callbacks, self._on_cancel = self._on_cancel, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run callback on cancel() (at once if cancelled already); returns a function that unregisters it."""
        if self.cancelled:
            callback()
        elif not self.finished:
            self._on_cancel.append(callback)

        def forget() -> None:
            if callback in self._on_cancel:
                self._on_cancel.remove(callback)

        return forget

    def check(self) -> None:
        if self.cancelled:
            raise CompactionStopped("cancelled")
        self._calls += 1
        if self._calls % CLOCK_EVERY == 0 and self.expired():
            raise CompactionStopped("deadline")


if TYPE_CHECKING:
    from .memo import Memo
    from .notes_io import NotesCache, Summariser
    from .tokens import TokenCounter


@dataclass(frozen=True)
class Context:
    """What a strategy may know about the request besides its messages.

    Everything from outside (the tokenizer, the summariser and notes cache, the memo, the deadline) arrives here,
    never through globals, so strategies stay pure and testable. What a strategy found out (for the stats) it
    returns with its messages (strategies.base.Applied), not here.
    """

    model: str
    tokens: TokenCounter
    # The request body without `messages` (tools, max_tokens, ...). Read-only by convention.
    request: Mapping[str, Any] = field(default_factory=dict)
    limits: ModelLimits = DEFAULT_LIMITS
    # The model's own prompt tokens per token this counter counts (learned from the upstream's usage): every count
    # is scaled by it, so budgets are in the model's tokens. 1.0: counts as the counter makes them.
    calibration: float = 1.0
    # Share of the context window held back from every default budget.
    safety_margin_percent: float = SAFETY_MARGIN_PERCENT
    # For the notes strategy (strategies.notes_io); None where nothing provides them, and notes then falls back.
    summariser: Summariser | None = None
    notes_cache: NotesCache | None = None
    # Results of pure per-content work shared across requests (strategies.memo); None: nothing remembered.
    memo: Memo | None = None
    # When the work must stop (strategies.context.Deadline); None: it runs to the end.
    deadline: Deadline | None = None
    # Whether stubs may tell the model to call the expand tool (strategies.refs): the proxy offers it on this
    # request. Where it cannot (another wire format, n > 1, the tool switched off) a stub names no ref, so the model
    # is never pointed at a tool it does not have.
    expandable: bool = True
    # Counts (before calibration) of the message objects seen in this request, by identity: steps share unchanged
    # messages, so counting after every step costs a lookup, not a re-hash of megabytes. The message is held so its
    # id cannot be reused.
    _counted: dict[int, tuple[Message, int]] = field(default_factory=dict, repr=False)
    _digests: dict[int, tuple[Message, bytes]] = field(default_factory=dict, repr=False)
    # Lossless rewrites made in this request (minify): the new text -> the text it was made from (ref_for).
    _sources: dict[str, str] = field(default_factory=dict, repr=False)
    # Counts (before calibration) of the `tools` definitions, by the identity of the list and the model: every
    # count_request would otherwise encode the client's tool definitions again (after every step, and twice more
    # where the expand tool was counted but is not offered). The list is held so its id cannot be reused.
    _tool_counts: dict[tuple[int, str], tuple[Any, int]] = field(default_factory=dict, repr=False)

    def rewrote(self, new: str, source: str) -> None:
        """Record that a lossless rewrite made `new` from `source`, so a stub made of `new` later names `source`."""
        if new != source:
            self._sources.setdefault(new, source)

    def ref_for(self, text: str) -> str | None:
        """The ref a stub standing for `text` carries: that of the client's content the text comes from, so the
        expand tool returns the original, in one call, whatever chain made the text. A text a lossless rewrite made
        stands for its source; a text that holds a stub already (a pruned or truncated result, a dedupe pointer)
        for the original that stub names; any other text for itself. None where the request is not `expandable`.
        """
        if not self.expandable:
            return None
        for _ in range(MAX_REWRITES):
            source = self._sources.get(text)
            if source is None:
                break
            text = source
        return stands_for(text)

    def digest(self, message: Message) -> bytes:
        """The message's content digest (strategies.digests), computed once per message object per request."""
        seen = self._digests.get(id(message))
        if seen is not None and seen[0] is message:
            return seen[1]
        digest = message_digest(message)
        self._digests[id(message)] = (message, digest)
        return digest

    def count(self, messages: list[Message]) -> int:
        """Prompt tokens of these messages (with the reply priming), without the tool definitions."""
        return REPLY_PRIMING + sum(self.count_message(m) for m in messages)

    def count_message(self, message: Message) -> int:
        """One message with its per-message overhead, without the reply priming."""
        return self._calibrated(self._uncalibrated(message))

    def count_message_with(self, message: Message, change: int) -> int:
        """count_message of a copy of `message` whose calls differ, `change` being the sum over the calls that differ
        of call_tokens(new) - call_tokens(old): without building the copy or tokenizing it (TokenCounter.count_call).
        """
        return self._calibrated(self._uncalibrated(message) + change)

    def call_tokens(self, call: Any) -> int:
        """The tokens one call (an entry of tool_calls, or a function_call) adds to its message, before calibration."""
        return self.tokens.count_call(call, self.model)

    def _uncalibrated(self, message: Message) -> int:
        seen = self._counted.get(id(message))
        if seen is not None and seen[0] is message:
            return seen[1]
        self.checkpoint()  # a message not counted yet in this request: hashing, maybe tokenizing, ahead
        count = self.tokens.count_message(message, self.model, self.digest(message))
        self._counted[id(message)] = (message, count)
        return count

    def _calibrated(self, count: int) -> int:
        return round(count * self.calibration) if self.calibration != 1.0 else count

    def count_request(self, messages: list[Message]) -> int:
        """Prompt tokens of the whole request: messages plus the `tools` definitions."""
        tools = self._tools_tokens()
        return self.count(messages) + (round(tools * self.calibration) if self.calibration != 1.0 else tools)

    def _tools_tokens(self) -> int:
        definitions = self.request.get("tools")
        key = (id(definitions), self.model)
        held = self._tool_counts.get(key)
        if held is None or held[0] is not definitions:
            held = (definitions, self.tokens.count_tools(definitions, self.model))
            self._tool_counts[key] = held
        return held[1]

    def output_reserve(self) -> int:
        """Tokens the answer may take: the request's max_completion_tokens / max_tokens, else the model's
        maximum output, capped at half the context window (some models list max_output = context_window,
        which would leave no room for any prompt).
        """
        for key in ("max_completion_tokens", "max_tokens"):
            value = self.request.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return min(self.limits.max_output, self.limits.context_window // 2)

    def checkpoint(self) -> None:
        """Called by strategies in their loops: raises CompactionStopped once the request's
        deadline has passed or its client has gone.
        """
        if self.deadline is not None:
            self.deadline.check()
