"""Context window and output limits per model, from a packaged data file plus the operator's overrides."""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib.resources import files

from pydantic import BaseModel, ConfigDict, Field


class ModelLimits(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    context_window: int = Field(gt=0, description="Tokens the model reads and writes in one request.")
    max_output: int = Field(gt=0, description="Most tokens the model writes in one answer.")
    extended_context_window: int | None = Field(
        None, gt=0, description="The window when the request opts into a longer one (Anthropic's context-1m beta)."
    )


DEFAULT_LIMITS = ModelLimits(context_window=128_000, max_output=16_384)


def normalise(model: str) -> str:
    """`openai/gpt-4o` (routers) -> `gpt-4o`; `ft:gpt-4-0613:org::id` (fine-tunes) -> `gpt-4-0613`."""
    name = model.rsplit("/", 1)[-1].lower()
    if name.startswith("ft:"):
        name = name[3:].split(":", 1)[0]
    return name


class ModelTable:
    """Looks a model up by its longest matching name prefix; unknown models get the default limits."""

    def __init__(self, entries: Mapping[str, ModelLimits], default: ModelLimits = DEFAULT_LIMITS) -> None:
        self._entries = {k.lower(): v for k, v in entries.items()}
        # Longest first, so gpt-4o-mini wins over gpt-4o and gpt-4.
        self._prefixes = sorted(self._entries, key=len, reverse=True)
        self.default = default

    @classmethod
    def packaged(
        cls, overrides: Mapping[str, ModelLimits] | None = None, default: ModelLimits = DEFAULT_LIMITS
    ) -> ModelTable:
        data = json.loads(files("strategies").joinpath("data/models.json").read_text())
        entries = {name: ModelLimits(**limits) for name, limits in data["models"].items()}
        return cls({**entries, **(overrides or {})}, default)

    def lookup(self, model: str, extended: bool = False) -> ModelLimits:
        """extended: the request opts into the model's longer window, where it has one."""
        found = self.find(model, extended)
        return found[1] if found is not None else self.default

    def find(self, model: str, extended: bool = False) -> tuple[str, ModelLimits] | None:
        """The longest matching prefix and its limits (extended: as lookup); None when the table does not know
        the model.
        """
        name = normalise(model)
        prefix = next((p for p in self._prefixes if name.startswith(p)), None)
        if prefix is None:
            return None
        limits = self._entries[prefix]
        if extended and limits.extended_context_window:
            limits = limits.model_copy(update={"context_window": limits.extended_context_window})
        return prefix, limits
