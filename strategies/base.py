"""The contract every strategy implements: typed parameters in, messages in, new messages out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from .digests import message_digest
from .models import DEFAULT_LIMITS, ModelLimits

REPLY_PRIMING = 3  # every reply is primed with <|start|>assistant<|message|> (OpenAI's cookbook)

if TYPE_CHECKING:
    from .chain import Chain
    from .deadline import Deadline
    from .memo import Memo
    from .notes_io import NotesCache, Summariser
    from .tokens import TokenCounter

Message = dict[str, Any]


# Marks a parameter that spends what the operator pays for or trusts (a model, a prompt, code such as a regular
# expression): a request may set it only where the configuration allows (the app's request_parameters).
CONFIG_ONLY: dict[str, Any] = {"config_only": True}


class Params(BaseModel):
    """Base for strategy parameters: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def config_only(cls) -> frozenset[str]:
        """The parameters a request may not set unless the configuration allows it (see CONFIG_ONLY)."""
        return frozenset(
            name
            for name, info in cls.model_fields.items()
            if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("config_only")
        )


P = TypeVar("P", bound=Params)


@dataclass(frozen=True)
class Context:
    """What a strategy may know about the request besides its messages.

    Everything from outside (tokenizer, later an LLM or a cache) arrives here, never through globals,
    so strategies stay pure and testable.
    """

    model: str
    tokens: TokenCounter
    # The request body without `messages` (tools, max_tokens, ...). Read-only by convention.
    request: Mapping[str, Any] = field(default_factory=dict)
    limits: ModelLimits = DEFAULT_LIMITS
    # What the running step reports for the stats (e.g. overflow); Chain.run collects it per step.
    details: dict[str, Any] = field(default_factory=dict)
    # For the notes strategy (strategies.notes_io); None where nothing provides them, and notes then falls back.
    summariser: Summariser | None = None
    notes_cache: NotesCache | None = None
    # Builds a chain from its text with the app's registry and configured parameters (notes' fallback chain);
    # None: the built-in strategies with their defaults.
    chains: Callable[[str], Chain] | None = None
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

    def report(self, **details: Any) -> None:
        self.details.update(details)


class Strategy(ABC, Generic[P]):
    """A named message transform. Subclasses set `name`, `params_model` and `summary`, and implement apply.

    apply must not mutate its input: it returns a new list, and a new dict for every message it
    changes (unchanged messages may be shared).
    """

    name: ClassVar[str]
    params_model: ClassVar[type[Params]]
    summary: ClassVar[str]

    def __init__(self, params: P) -> None:
        self.params = params

    @abstractmethod
    def apply(self, messages: list[Message], ctx: Context) -> list[Message]: ...
