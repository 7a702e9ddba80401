"""Name -> strategy class. Built-ins register here; other packages through an entry-point group."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib.metadata import entry_points
from typing import Any

from pydantic import ValidationError

from .base import Params, Strategy
from .chain_syntax import StepSpec
from .clear_tool_uses import ClearToolUses
from .dedupe import Dedupe
from .fit import Fit
from .mask import Mask
from .middle_out import MiddleOut
from .minify import Minify
from .none import Noop
from .notes import Notes
from .prune_tool_outputs import PruneToolOutputs
from .shorten_tools import ShortenTools
from .trim_bulky import TrimBulky
from .window import Window

ENTRY_POINT_GROUP = "compaction_proxy.strategies"
BUILTINS: tuple[type[Strategy[Any]], ...] = (
    Noop,
    ShortenTools,
    PruneToolOutputs,
    Window,
    TrimBulky,
    Fit,
    MiddleOut,
    ClearToolUses,
    Minify,
    Dedupe,
    Notes,
    Mask,
)


class StrategyError(ValueError):
    """A chain names an unknown strategy or gives a strategy a bad parameter.

    `code` is short and machine-readable (unknown_strategy, unknown_parameter, invalid_parameter).
    """

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class Registry:
    def __init__(self, strategies: Iterable[type[Strategy[Any]]] = ()) -> None:
        self._classes: dict[str, type[Strategy[Any]]] = {}
        for cls in strategies:
            self.register(cls)

    @classmethod
    def with_plugins(cls) -> Registry:
        """The built-ins plus every strategy installed under the entry-point group."""
        registry = cls(BUILTINS)
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            strategy = ep.load()
            if getattr(strategy, "name", None) != ep.name:
                raise ValueError(f"entry point {ep.name!r} ({ep.value}) must load a Strategy named {ep.name!r}")
            registry.register(strategy)
        return registry

    def register(self, cls: type[Strategy[Any]]) -> None:
        if not (isinstance(cls, type) and issubclass(cls, Strategy)):
            raise TypeError(f"{cls!r} is not a Strategy subclass")
        if cls.name in self._classes:
            raise ValueError(f"strategy {cls.name!r} is already registered")
        self._classes[cls.name] = cls

    def names(self) -> list[str]:
        return sorted(self._classes)

    def get(self, name: str) -> type[Strategy[Any]]:
        try:
            return self._classes[name]
        except KeyError:
            raise StrategyError(
                f"unknown strategy {name!r}; valid strategies: {', '.join(self.names())}", "unknown_strategy"
            ) from None

    def params_for(self, name: str, values: Mapping[str, Any]) -> Params:
        """Validate parameters for a strategy, naming the offending key and what is valid."""
        model = self.get(name).params_model
        valid = ", ".join(model.model_fields) or "(none)"
        for key in values:
            if key in model.renamed and key not in model.model_fields:
                raise StrategyError(
                    f"strategy {name!r}: parameter {key!r} is now called {model.renamed[key]!r}", "unknown_parameter"
                )
            if key not in model.model_fields:
                raise StrategyError(
                    f"strategy {name!r} has no parameter {key!r}; valid parameters: {valid}", "unknown_parameter"
                )
        try:
            return model(**values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']} (got {err.get('input')!r})"
                for err in exc.errors()
            )
            raise StrategyError(f"invalid parameter for {name!r}: {problems}", "invalid_parameter") from None

    def describe(self, configured: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
        """Every strategy with its summary and its parameters: name, JSON type, default (the configured value
        where the configuration sets one), description, and whether only the configuration may set it. What the
        X-Compaction-Strategies header accepts, as JSON (GET /strategies).
        """
        described = []
        for name in self.names():
            model = self.get(name).params_model
            properties = model.model_json_schema().get("properties", {})
            config_only = model.config_only()
            settings = (configured or {}).get(name, {})
            parameters = [
                {
                    "name": key,
                    "type": _json_type(properties.get(key, {})),
                    "default": settings.get(key, field.default),
                    "description": field.description or "",
                    "config_only": key in config_only,
                }
                for key, field in model.model_fields.items()
            ]
            described.append({"name": name, "summary": self.get(name).summary, "parameters": parameters})
        return described

    def build(self, step: StepSpec, configured: Mapping[str, Any] | None = None) -> Strategy[Any]:
        """An instance with the configured parameters overridden by the step's own."""
        params = self.params_for(step.name, {**(configured or {}), **step.params})
        return self.get(step.name)(params)


def _json_type(schema: Mapping[str, Any]) -> str:
    """A parameter's JSON schema type in one line: "integer", "integer | null", "array of string", ..."""
    if "anyOf" in schema:
        return " | ".join(dict.fromkeys(_json_type(option) for option in schema["anyOf"]))
    if "enum" in schema:
        return " | ".join(f'"{value}"' for value in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        items = schema.get("items")
        return f"array of {_json_type(items)}" if isinstance(items, Mapping) else "array"
    return str(kind)
