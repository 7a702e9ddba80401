"""What a strategy may know about a request besides its messages, and the services it may use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .digests import message_digest
from .messages import REPLY_PRIMING, Message
from .models import DEFAULT_LIMITS, ModelLimits

if TYPE_CHECKING:
    from .deadline import Deadline
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
    # For the notes strategy (strategies.notes_io); None where nothing provides them, and notes then falls back.
    summariser: Summariser | None = None
    notes_cache: NotesCache | None = None
    # Results of pure per-content work shared across requests (strategies.memo); None: nothing remembered.
    memo: Memo | None = None
    # When the work must stop (strategies.deadline); None: it runs to the end.
    deadline: Deadline | None = None
    # Counts of the message objects seen in this request, by identity: steps share unchanged messages, so
    # counting after every step costs a lookup, not a re-hash of megabytes. The message is held so its id
    # cannot be reused.
    _counted: dict[int, tuple[Message, int]] = field(default_factory=dict, repr=False)
    _digests: dict[int, tuple[Message, bytes]] = field(default_factory=dict, repr=False)

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
        seen = self._counted.get(id(message))
        if seen is not None and seen[0] is message:
            return seen[1]
        self.checkpoint()  # a message not counted yet in this request: hashing, maybe tokenizing, ahead
        count = self.tokens.count_message(message, self.model, self.digest(message))
        self._counted[id(message)] = (message, count)
        return count

    def count_request(self, messages: list[Message]) -> int:
        """Prompt tokens of the whole request: messages plus the `tools` definitions."""
        return self.count(messages) + self.tokens.count_tools(self.request.get("tools"), self.model)

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
        """Called by strategies in their loops: raises strategies.deadline.CompactionStopped once the request's
        deadline has passed or its client has gone.
        """
        if self.deadline is not None:
            self.deadline.check()
