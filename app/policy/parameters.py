"""Which strategy parameters a request may set.

A request's X-Compaction-Strategies header chooses the chain and its parameters. Parameters marked config-only
by their strategy (strategies.base.CONFIG_ONLY: the summariser's model and prompt, the notes' role, code such as
regular expressions) spend what the operator pays for or trusts, so a request may set them only where the
configuration says so: `request_parameters` lists them by `strategy.parameter`, `summariser_models` the models
a request may name for notes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.edge.errors import ApiError
from strategies import ChainSyntaxError, Registry, StepSpec, StrategyError, parse_chain

HEADER = "X-Compaction-Strategies"


class RequestPolicy:
    def __init__(self, registry: Registry, allowed: Iterable[str] = (), models: Iterable[str] = ()) -> None:
        """Raises ValueError naming an entry of `allowed` that is no config-only parameter of any strategy."""
        self.registry = registry
        self.allowed = frozenset(allowed)
        self.models = frozenset(models)
        for entry in sorted(self.allowed):
            name, _, parameter = entry.partition(".")
            try:
                config_only = registry.get(name).params_model.config_only()
            except StrategyError:
                config_only = frozenset()
            if parameter not in config_only:
                raise ValueError(
                    f"request_parameters: {entry!r} is not a config-only parameter; they are: "
                    + ", ".join(self.config_only_names())
                )

    def config_only_names(self) -> list[str]:
        return [
            f"{name}.{parameter}"
            for name in self.registry.names()
            for parameter in sorted(self.registry.get(name).params_model.config_only())
        ]

    def check(self, specs: list[StepSpec]) -> None:
        """Raises a 400 ApiError for the first parameter the request may not set. Strategy names and parameter
        values have been validated already (Chain.parse).
        """
        for spec in specs:
            params_model = self.registry.get(spec.name).params_model
            config_only = params_model.config_only()
            for key, value in spec.params.items():
                if key in config_only and not self._allows(spec.name, key, value):
                    raise ApiError(
                        400,
                        f"Parameter {key!r} of strategy {spec.name!r} is set by the proxy's configuration only; "
                        f"it may come from a request where the setting request_parameters lists "
                        f"'{spec.name}.{key}'"
                        + (" (or summariser_models lists the model)." if key == "model" else "."),
                        param=HEADER,
                        code="parameter_not_allowed",
                    )
                if _is_chain(params_model, key) and isinstance(value, str):
                    try:
                        self.check(parse_chain(value))
                    except ChainSyntaxError:
                        pass  # the parameter's own validation has refused it already

    def _allows(self, strategy: str, key: str, value: Any) -> bool:
        if f"{strategy}.{key}" in self.allowed:
            return True
        return strategy == "notes" and key == "model" and value in self.models


def _is_chain(params_model: type[Any], key: str) -> bool:
    extra = params_model.model_fields[key].json_schema_extra
    return isinstance(extra, dict) and bool(extra.get("chain"))
