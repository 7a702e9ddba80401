"""build_compactor: the one builder of the Compactor from settings, create_app's and the benchmarks'."""

from __future__ import annotations

from app.compaction.compactor import build_compactor
from app.main import create_app
from app.settings import Settings
from strategies import ModelLimits


def test_what_is_not_given_is_built_from_the_settings() -> None:
    small = ModelLimits(context_window=4096, max_output=512)
    settings = Settings(models={"my-llama": small}, default_context_window=50_000, strategy_memo_chars=0)
    compactor = build_compactor(settings)
    assert compactor.model_table.lookup("my-llama-3") == small
    assert compactor.model_table.lookup("gpt-4o").context_window == 128_000  # the packaged table under them
    assert compactor.model_table.lookup("unknown").context_window == 50_000
    assert compactor.memo is None and build_compactor(Settings()).memo is not None
    assert "mask" in compactor.registry.names() and compactor.default_chain.spec == settings.default_strategies
    assert compactor.keys is None and compactor.notes is None and compactor.prefix is None


def test_create_app_builds_its_compactor_with_it() -> None:
    settings = Settings(models={"my-llama": ModelLimits(context_window=4096, max_output=512)}, prefix_tracking=False)
    compactor = create_app(settings).state.services.compactor
    built = build_compactor(settings)
    assert compactor.model_table.lookup("my-llama").context_window == 4096
    assert type(compactor.memo) is type(built.memo) and compactor.default_chain.spec == built.default_chain.spec
    assert compactor.keys is not None and compactor.upstream_models is not None  # what only a live server has
