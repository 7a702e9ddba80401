"""The proxy's Compactor without a server, for the benchmarks that run its per-request path (parse the body, run
the chain, settle, count tokens before and after, serialise: Compactor.compact_sync).

Built by app.compaction.compactor.build_compactor, the builder create_app uses, without what only a live request
needs (the notes runtime, the prompt-cache report, the client's keys): what the benchmarks measure is what ships.
"""

from __future__ import annotations

from typing import Any

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from app.compaction.compactor import Compactor, build_compactor
from app.settings import Settings
from strategies import Encodings, ModelTable, Registry


class _Shipped(Settings):
    """Settings read from the arguments alone: no COMPACTION_* environment, no config file."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def shipped_settings(**overrides: Any) -> Settings:
    """The settings as the proxy ships them (the code's defaults) with `overrides`, whatever the environment of the
    shell the benchmark runs in says: its figures must not depend on it.
    """
    return _Shipped(**overrides)


def compactor(
    settings: Settings, encodings: Encodings, registry: Registry | None = None, models: ModelTable | None = None
) -> Compactor:
    """A Compactor with cold caches (token counts, memo) on `encodings`, whose tokenizers stay loaded: loading one
    is start-up cost, not per-request cost. registry: the built-in and installed strategies if None; models: the
    packaged table with settings.models over it if None.
    """
    return build_compactor(settings, registry, encodings=encodings, models=models)
