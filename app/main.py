"""create_app: the only place where settings, the strategy registry and the upstream client come together."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI

from strategies import Encodings, ModelLimits, ModelTable, Registry, TokenCounter

from .compaction import Compactor
from .errors import install_error_handlers
from .routes import chat, health, passthrough
from .services import Services
from .settings import Settings
from .upstream import Upstream


class ConfigError(ValueError):
    """A setting that parses but cannot work, e.g. a default chain naming an unknown strategy."""


def create_app(settings: Settings | None = None, registry: Registry | None = None) -> FastAPI:
    settings = settings or Settings()
    registry = registry or Registry.with_plugins()
    counter = TokenCounter(Encodings(), cache_size=settings.token_cache_size)
    try:
        models = ModelTable.packaged(
            settings.models,
            ModelLimits(context_window=settings.default_context_window, max_output=settings.default_max_output),
        )
        compactor = Compactor(registry, counter, models, settings.default_strategies, settings.strategies)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        upstream = Upstream(settings)
        app.state.services = Services(settings, compactor, upstream)
        # Load the default encoding now rather than on the first request (about 0.3 s).
        await anyio.to_thread.run_sync(counter.count_text, "warm up", "gpt-4o")
        try:
            yield
        finally:
            await upstream.aclose()

    app = FastAPI(title="Compaction Proxy", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(chat.router)
    app.include_router(passthrough.router)  # last: it matches every /v1/* path
    return app
