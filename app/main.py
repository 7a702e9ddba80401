"""create_app: the only place where settings, the strategy registry and the upstream client come together."""

from __future__ import annotations

import gc
import importlib.metadata
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.to_thread
from fastapi import Depends, FastAPI

from app.cache import CacheError, open_backend
from app.compaction.compactor import build_compactor, model_table
from app.compaction.inspect import InspectRing
from app.compaction.prefix import PrefixTracker
from app.edge.body import BodyTimeoutMiddleware
from app.edge.error_handlers import InternalErrorMiddleware, install_error_handlers
from app.edge.metrics import MULTIPROCESS_DIR_ENV, Metrics, MetricsMiddleware
from app.edge.request_id import RequestIdMiddleware
from app.expansion.loop import Expander
from app.expansion.memory import ExpansionMemory
from app.notes.runtime import NotesRuntime
from app.policy.keys import Keys, OpenRelayError
from app.routes import compacted, health, inspect, passthrough, savings, strategies, websocket
from app.savings.ledger import Ledger
from app.savings.page import Dashboard
from app.savings.store import open_store
from app.server.logs import configure_logging
from app.server.readiness import Readiness
from app.services import Services, authenticate
from app.settings import Settings
from app.upstream.client import Upstream, printable_url
from app.upstream.models import UpstreamModels
from app.wire import wire_formats
from strategies import Registry

logger = logging.getLogger("compaction_proxy.main")


def _version() -> str:
    try:
        return importlib.metadata.version("compaction-proxy")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "0+unknown"


class ConfigError(ValueError):
    """A setting that parses but cannot work, e.g. a default chain naming an unknown strategy."""


def create_app(settings: Settings | None = None, registry: Registry | None = None) -> FastAPI:
    settings = settings or Settings()
    registry = registry or Registry.with_plugins()
    try:
        keys = Keys(settings)
    except OpenRelayError as exc:
        raise ConfigError(str(exc)) from None
    try:
        models = model_table(settings)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    # prometheus_client's own switch, read by it at import: follow it, so what is written is what is exposed.
    metrics = Metrics(os.environ.get(MULTIPROCESS_DIR_ENV) or None)
    readiness = Readiness()
    upstream = Upstream(settings, keys, metrics)
    try:
        prefix = PrefixTracker.open(settings) if settings.prefix_tracking else None
        expansions = ExpansionMemory.open(settings) if settings.expand_max_rounds else None
        notes = NotesRuntime.build(settings, keys, models, upstream.client, metrics.summariser_call)
        # A backend of its own, as the prefix tracker has: learned limits live a week and never evict notes.
        learned = (
            open_backend(settings.cache_url, ttl=settings.cache_ttl_seconds, max_entries=settings.learned_models_max)
            if settings.learn_limits
            else None
        )
        store = open_store(settings.cache_url)
    except CacheError as exc:  # a SQLite file that cannot be created, say; only the error: the URL may hold a password
        raise ConfigError(f"cache_url: the cache cannot be opened: {exc}") from None
    upstream_models = UpstreamModels.build(
        models,
        settings.models,
        models.default,
        backend=learned,
        upstream=settings.upstream_base_url,
        max_models=settings.learned_models_max,
        calibrate=settings.calibrate_counts,
    )
    try:
        compactor = build_compactor(
            settings,
            registry,
            models=models,
            keys=keys,
            notes=notes,
            prefix=prefix,
            expansions=expansions,
            upstream_models=upstream_models,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    ledger = Ledger(
        store, metrics, max_models=settings.savings_max_models, history_minutes=settings.savings_history_minutes
    )
    expander = Expander(settings, upstream, ledger, expansions)
    ring = InspectRing(settings.inspect_requests) if settings.inspect_requests else None
    services = Services(
        settings,
        compactor,
        upstream,
        upstream_models,
        expander,
        keys,
        metrics,
        readiness,
        ledger,
        Dashboard(),
        inspect=ring,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await notes.start()
        # Load the default encoding now rather than on the first request (about 0.3 s).
        await anyio.to_thread.run_sync(compactor.counter.count_text, "warm up", "gpt-4o")
        # What start-up built lives as long as the process: kept out of the cyclic GC's full collections, which
        # walked all of it and paused every request in flight for tens of milliseconds (bench.overhead, p99).
        gc.collect()
        gc.freeze()
        readiness.start()
        logger.info(
            "forwarding to %s (chat completions, Responses) and %s (Messages)",
            printable_url(settings.upstream_base_url),
            printable_url(settings.anthropic_base_url),
        )
        try:
            async with anyio.create_task_group() as background:
                background.start_soon(ledger.run)
                try:
                    yield
                finally:
                    background.cancel_scope.cancel()  # ledger.run flushes once more as it stops
        finally:
            readiness.stop()
            await notes.aclose()  # first: it cancels background folds that use the upstream client
            await upstream.aclose()
            if prefix is not None:
                await anyio.to_thread.run_sync(prefix.close)
            if expansions is not None:
                await anyio.to_thread.run_sync(expansions.close)
            await anyio.to_thread.run_sync(upstream_models.close)
            await anyio.to_thread.run_sync(ledger.close)
            # The app's objects back under the collector once it is done: a process that builds another app (the
            # tests, the benchmarks) would otherwise keep every stopped one for good, 60-70 MB each.
            gc.unfreeze()

    # /openapi.json describes the proxy's own routes (the fuzz tests generate requests from it); no docs UI,
    # whose pages would load scripts from a CDN.
    app = FastAPI(
        title="Compaction Proxy",
        version=_version(),
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
        # Starlette would answer a path that matches no route but does with a slash added or removed (GET /v1)
        # with a redirect built from the client's Host header: a 404 in OpenAI's shape instead.
        redirect_slashes=False,
    )
    app.state.services = services
    # The server marks the app not ready as soon as a shutdown begins, before draining (app.server.serve).
    app.state.readiness = readiness
    install_error_handlers(app)
    app.include_router(health.router)  # /healthz, /readyz and /metrics need no key
    guarded = [Depends(authenticate)]
    app.include_router(compacted.router(wire_formats()), dependencies=guarded)
    app.include_router(websocket.router, dependencies=guarded)
    app.include_router(strategies.router, dependencies=guarded)
    app.include_router(inspect.router, dependencies=guarded)  # it holds content: behind the keys
    # The page holds no figures, so anyone may load it; its script asks /savings, with the key.
    app.include_router(savings.page_router)
    app.include_router(savings.router, dependencies=guarded)
    app.include_router(passthrough.router, dependencies=guarded)  # last: it matches every /v1/* path
    app.add_middleware(BodyTimeoutMiddleware, timeout=settings.request_body_timeout_seconds)
    # Metrics count its 500s like any answer.
    app.add_middleware(InternalErrorMiddleware)
    # Added last, so outermost: every log line of a request, metrics' included, carries its id.
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.add_middleware(RequestIdMiddleware)
    return app


def create_app_from_env() -> FastAPI:
    """The app of one worker process under `--workers N` (uvicorn imports it as app.main:create_app_from_env
    with factory=True), also usable as `uvicorn --factory app.main:create_app_from_env`. Settings come from
    the COMPACTION_* environment and the config file it names: the CLI turns its flags into such variables
    for its workers. A spawned worker starts with bare logging, so it is set up here as the CLI does.
    """
    settings = Settings()
    configure_logging(settings.log_level, settings.log_format)
    return create_app(settings)
