"""The contract every strategy implements: typed parameters in, messages in, new messages (and what it found
out) out; or, when something outside failed, Unavailable, so that the chain runs the strategy's fallback.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from .messages import Message

if TYPE_CHECKING:
    from .context import Context

# Marks a parameter that spends what the operator pays for or trusts (a model, a prompt, code such as a regular
# expression): a request may set it only where the configuration allows (the app's request_parameters).
CONFIG_ONLY: dict[str, Any] = {"config_only": True}
# Marks a parameter whose value is a chain (notes' fallback): held to the same rules as the chain it is in.
CHAIN: dict[str, Any] = {"chain": True}


class Params(BaseModel):
    """Base for strategy parameters: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # Old name -> new name, so that a configuration or header with a renamed parameter gets told the new one.
    renamed: ClassVar[dict[str, str]] = {}

    @classmethod
    def config_only(cls) -> frozenset[str]:
        """The parameters a request may not set unless the configuration allows it (see CONFIG_ONLY)."""
        return cls._marked("config_only")

    @classmethod
    def chains(cls) -> frozenset[str]:
        """The parameters whose values are chains (see CHAIN)."""
        return cls._marked("chain")

    @classmethod
    def _marked(cls, mark: str) -> frozenset[str]:
        return frozenset(
            name
            for name, info in cls.model_fields.items()
            if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get(mark)
        )


P = TypeVar("P", bound=Params)


@dataclass(frozen=True)
class Applied:
    """What a strategy's apply returns: the new messages, and what it found out, for the per-step stats."""

    messages: list[Message]
    details: Mapping[str, Any] = field(default_factory=dict)


class Strategy(ABC, Generic[P]):
    """A named message transform. Subclasses set `name`, `params_model` and `summary`, and implement apply.

    apply must not mutate its input: it returns a new list, and a new dict for every message it
    changes (unchanged messages may be shared).
    """

    name: ClassVar[str]
    params_model: ClassVar[type[Params]]
    summary: ClassVar[str]  # one line, for GET /strategies
    # Needs the Context's summariser and notes cache: the app provides them only to chains that do.
    uses_summariser: ClassVar[bool] = False
    # Writes stubs with refs (strategies.refs) for what it removes: the app then offers the expand tool.
    reversible: ClassVar[bool] = False

    def __init__(self, params: P) -> None:
        self.params = params

    @abstractmethod
    def apply(self, messages: list[Message], ctx: Context) -> Applied: ...

    def fallback(self) -> str | None:
        """The chain to run instead when apply raises Unavailable (None: the request goes on uncompacted)."""
        return None
