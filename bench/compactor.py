"""The proxy's Compactor without a server, for the benchmarks that time its whole per-request CPU path (parse the
body, run the chain, count tokens before and after, serialise: Compactor.compact_sync).

Built from Settings as app/main.py builds it, except for what only guards a live request: no compaction
deadline, the default JSON depth, fail-open, the packaged model table. A copy of that construction, kept here
once for bench.speed and bench.complexity, until the app offers it.
"""

from __future__ import annotations

from app.compaction import Compactor
from app.lanes import Lanes
from app.request_policy import RequestPolicy
from app.settings import Settings
from strategies import Encodings, Memo, ModelTable, Registry, TokenCounter


def compactor(
    settings: Settings, encodings: Encodings, registry: Registry | None = None, models: ModelTable | None = None
) -> Compactor:
    """A Compactor with cold caches (token counts, memo) on `encodings`, whose tokenizers stay loaded: loading one
    is start-up cost, not per-request cost.
    """
    registry = registry or Registry.with_plugins()
    return Compactor(
        registry,
        TokenCounter(encodings, cache_size=settings.token_cache_size),
        models or ModelTable.packaged(),
        settings.default_strategies,
        settings.strategies,
        lanes=Lanes(settings),
        policy=RequestPolicy(registry, settings.request_parameters, settings.summariser_models),
        memo=Memo(settings.strategy_memo_chars) if settings.strategy_memo_chars else None,
    )
