"""The proxy's Compactor without a server, for the benchmarks that time its whole per-request CPU path (parse the
body, run the chain, count tokens before and after, serialise: Compactor.compact_sync).

Built from Settings as app/main.py builds it, without what only a live request needs (the notes runtime, the
prompt-cache report, the client's keys).
"""

from __future__ import annotations

from app.compaction.compactor import Compactor
from app.settings import Settings
from strategies import Encodings, Memo, ModelTable, Registry, TokenCounter


def compactor(
    settings: Settings, encodings: Encodings, registry: Registry | None = None, models: ModelTable | None = None
) -> Compactor:
    """A Compactor with cold caches (token counts, memo) on `encodings`, whose tokenizers stay loaded: loading one
    is start-up cost, not per-request cost.
    """
    return Compactor(
        settings,
        registry or Registry.with_plugins(),
        TokenCounter(encodings, cache_size=settings.token_cache_size),
        models or ModelTable.packaged(),
        memo=Memo(settings.strategy_memo_chars) if settings.strategy_memo_chars else None,
    )
