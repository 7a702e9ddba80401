"""All settings in one place. Precedence: defaults < TOML file < COMPACTION_* environment < CLI flags."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from strategies import ModelLimits

# Deeper than any real request (OpenAI's structured outputs allow 10 levels of schema nesting, about 25 levels of
# JSON in the body), far below orjson's 255 levels for writing a body back.
# Which upstream a request goes to: the OpenAI-compatible one (upstream_base_url) or Anthropic's (anthropic_base_url).
Api = Literal["openai", "anthropic"]
DEFAULT_MAX_JSON_DEPTH = 64


class TomlFileSource(PydanticBaseSettingsSource):
    """Reads the TOML config file. Unlike pydantic-settings' own source, a missing file is an error:
    a typo in --config must not silently start the proxy with defaults.
    """

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None) -> None:
        super().__init__(settings_cls)
        self.data: dict[str, Any] = {}
        if path is not None:
            try:
                with open(path, "rb") as fh:
                    self.data = tomllib.load(fh)
            except OSError as exc:
                raise ValueError(f"config file {path}: {exc.strerror}") from None
            except tomllib.TOMLDecodeError as exc:
                raise ValueError(f"config file {path}: {exc}") from None

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.data)


class Settings(BaseSettings):
    # hide_input_in_errors: a rejected value may be a key, and validation errors get printed.
    model_config = SettingsConfigDict(
        env_prefix="COMPACTION_", extra="forbid", validate_default=True, hide_input_in_errors=True
    )

    config: Path | None = Field(None, description="TOML file with these settings (COMPACTION_CONFIG).")
    host: str = Field("127.0.0.1", description="Address to listen on; 0.0.0.0 to accept other hosts.")
    port: int = Field(8080, ge=1, le=65535, description="Port to listen on.")
    upstream_base_url: str = Field(
        "https://api.openai.com/v1", description="OpenAI-compatible base URL requests are forwarded to."
    )
    anthropic_base_url: str = Field(
        "https://api.anthropic.com",
        description="Anthropic API base URL (as ANTHROPIC_BASE_URL: without /v1) that /v1/messages, its "
        "/v1/messages/* and any /v1/* call carrying anthropic-version are forwarded to.",
    )
    default_strategies: str = Field(
        "minify,mask,window",
        description="Chain used when a request sends no X-Compaction-Strategies header (the default was chosen by "
        "measurement: docs/benchmarks.md).",
    )
    strategies: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-strategy parameter defaults, e.g. {shorten_tools = {...}}."
    )
    connect_timeout: float = Field(10.0, gt=0, description="Seconds to open a connection upstream.")
    read_timeout: float = Field(
        600.0, gt=0, description="Seconds to wait for each chunk of the upstream answer (stream idle timeout)."
    )
    write_timeout: float = Field(60.0, gt=0, description="Seconds to send each chunk of the request upstream.")
    pool_timeout: float = Field(10.0, gt=0, description="Seconds to wait for a free upstream connection.")
    max_connections: int = Field(
        512, ge=1, description="Upstream connections open at once (an idle one is closed after 5 s)."
    )
    models: dict[str, ModelLimits] = Field(
        default_factory=dict,
        description="Context window and max output per model-name prefix, added to or overriding the built-in table.",
    )
    default_context_window: int = Field(
        128_000,
        gt=0,
        description="Context window assumed for a model that is not configured, not in the built-in table and whose "
        "window the upstream does not publish (--context-window); a warning says so the first time.",
    )
    default_max_output: int = Field(16_384, gt=0, description="Max output tokens of models not in the table.")
    learn_limits: bool = Field(
        True,
        description="Learn each model's context window from the upstream: the metadata it publishes (asked once, "
        "for a model the table does not know) and its context-length errors (the request is then compacted to the "
        "window stated and retried once, with X-Compaction-Retried). Kept in the cache at cache_url.",
    )
    calibrate_counts: bool = Field(
        True,
        description="Scale the proxy's token counts per model by the ratio of the upstream's usage.prompt_tokens to "
        "them (smoothed, kept in the cache at cache_url), so budgets and X-Compaction-Tokens-* are in the model's "
        "own tokens. Needs learn_limits.",
    )
    safety_margin_percent: float = Field(
        2.0, ge=0, le=50, description="Share of the context window held back from every default budget."
    )
    learned_models_max: int = Field(
        1024, ge=1, description="Models whose learned window and calibration one process keeps (per cache)."
    )
    token_cache_size: int = Field(100_000, ge=0, description="Messages whose token counts are remembered.")
    strategy_memo_chars: int = Field(
        16_000_000,
        ge=0,
        description="Characters of strategy results remembered across requests (minify's output per tool result, "
        "epochs' jump points per conversation prefix, each entry charged 64 more); 0: none.",
    )
    log_level: str = Field("info", description="debug, info, warning or error.")
    log_format: Literal["auto", "json", "text"] = Field(
        "auto",
        description="json: one JSON object per line; text: one human-readable line per record; auto: text when "
        "the log (stderr) is a terminal, json otherwise.",
    )
    # NoDecode: the environment gives a comma-separated list, not JSON (see _key_list).
    api_keys: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=list,
        description="Keys clients must send as 'Authorization: Bearer <key>' (or 'x-api-key: <key>', as "
        "Anthropic's clients do). Empty: the client's own key is passed upstream.",
    )
    upstream_api_key: SecretStr = Field(
        SecretStr(""), description="Key sent upstream instead of the client's; needs api_keys. Empty: none."
    )
    anthropic_api_key: SecretStr = Field(
        SecretStr(""),
        description="Key sent to anthropic_base_url as x-api-key instead of the client's; needs api_keys. Empty: none.",
    )
    allow_unauthenticated: bool = Field(
        False,
        description="Start with an upstream_api_key, anthropic_api_key or summariser_api_key but no api_keys, so "
        "anyone who reaches the port uses them.",
    )
    max_body_bytes: int = Field(32 * 1024 * 1024, ge=1, description="Largest request body accepted (413 above).")
    max_json_depth: int = Field(
        DEFAULT_MAX_JSON_DEPTH,
        ge=5,
        le=255,
        description="Deepest nesting of arrays and objects in a body the proxy compacts (400 too_deep above); at "
        "most 255, what orjson can write back.",
    )
    on_strategy_error: Literal["forward", "fail"] = Field(
        "forward",
        description="When a strategy raises: forward the request uncompacted (fail open) or answer 500 (fail closed).",
    )
    # --- What one request may cost: time, threads, parameters, summariser calls ---
    compaction_deadline_seconds: float = Field(
        30.0,
        gt=0,
        description="Seconds a request's compaction may take, waiting for a thread included; past it the request "
        "is forwarded uncompacted with X-Compaction-Fallback: compaction_deadline (on /compact: a 503).",
    )
    compaction_threads: int = Field(8, ge=1, description="Requests compacted at once in the small-request lane.")
    inline_compaction_bytes: int = Field(
        256 * 1024,
        ge=0,
        description="Bodies under this size are compacted on the event loop itself, where a thread hop and the "
        "GIL fought over with the loop would cost more than their compaction (about 2 ms of CPU at 256 KB), "
        "unless they hold more than 512 messages. Only with a memory:// cache_url and built-in strategies without "
        "notes: I/O must not block the loop. 0: every body in a thread.",
    )
    large_request_bytes: int = Field(
        1024 * 1024,
        ge=1,
        description="Bodies at least this large are compacted in the large-request lane, so they never hold up "
        "the small ones.",
    )
    large_compaction_threads: int = Field(2, ge=1, description="Large requests compacted at once.")
    large_compaction_queue_bytes: int = Field(
        256 * 1024 * 1024,
        ge=0,
        description="Bytes of large request bodies that may wait for a thread; a large request past them is "
        "answered 503 with Retry-After instead of being held in memory.",
    )
    request_parameters: list[str] = Field(
        default_factory=list,
        description="Strategy parameters that spend what the operator pays for or trusts, which a request's "
        "X-Compaction-Strategies header may set only when listed here: notes.model (or see summariser_models), "
        "notes.prompt, notes.role, notes.fallback, trim_bulky.patterns. The configuration may always set them.",
    )
    summariser_models: list[str] = Field(
        default_factory=list,
        description="Models a request may name in notes(model=...), besides the configured one.",
    )
    summariser_max_calls: int = Field(
        4,
        ge=0,
        description="Summariser calls one request may cause, ahead-of-need folds included; past them notes "
        "falls back (summariser_limit) and the folds made so far stay cached for the next request.",
    )
    # --- Running notes (the notes strategy): cache, summariser, work ahead of need ---
    cache_url: str = Field(
        "memory://",
        description="Where notes are cached: memory:// (this process), sqlite:///path (a file, survives "
        "restarts), redis://host:port/db (shared by replicas).",
    )
    cache_ttl_seconds: int = Field(
        7 * 24 * 3600, ge=1, description="Seconds an unused notes entry is kept; each use starts the count again."
    )
    cache_max_entries: int = Field(10_000, ge=1, description="Notes entries a memory:// cache holds (LRU).")
    summariser_base_url: str = Field(
        "", description="OpenAI-compatible base URL of the summariser. Empty: upstream_base_url."
    )
    summariser_model: str = Field(
        "", description="Model notes are made with, unless the strategy names one. Empty: the request's model."
    )
    summariser_api_key: SecretStr = Field(
        SecretStr(""),
        description="Key for summariser calls; needs api_keys. Empty: the key the request itself is forwarded with.",
    )
    summariser_timeout: float = Field(60.0, gt=0, description="Seconds one summariser call may take in all.")
    notes_ahead_max: int = Field(
        4, ge=0, description="Folds made ahead of need in the background at once (0: none are made ahead)."
    )
    # --- Prompt-cache reporting (X-Compaction-Prefix), its state kept in the cache at cache_url ---
    prefix_tracking: bool = Field(
        True,
        description="Answer every compacted request (chat completions, Responses, Messages) with X-Compaction-Prefix: "
        "whether the forwarded request extends the one forwarded before for the same conversation (new, extends, "
        "breaks; unknown when the cache fails).",
    )
    prefix_tracking_ttl_seconds: int = Field(
        3600, gt=0, description="Seconds a conversation's last forwarded prefix is remembered; each request renews it."
    )
    # --- What compaction did, for GET /inspect (app.compaction.inspect) ---
    inspect_requests: int = Field(
        0,
        ge=0,
        le=1000,
        description="Recent forwarded requests whose per-message diff (original against compacted) this process keeps "
        "for GET /inspect and `compaction-proxy inspect`; it holds previews of their content. 0: none, and /inspect "
        "answers 404.",
    )
    inspect_entry_chars: int = Field(
        50_000,
        ge=1000,
        le=10_000_000,
        description="Characters one request's entry may hold: its rows (each charged 120) and their previews of each "
        "message before and after (at most 160 characters each); rows past it are counted, not listed.",
    )
    # --- Reversible compaction: the expand tool the proxy answers itself (app.expansion) ---
    expand_max_rounds: int = Field(
        3,
        ge=0,
        le=10,
        description="Calls of the expand tool (compaction_expand) the proxy answers for one request, each one "
        "more upstream request; past them it asks once more without the tool. 0: the tool is never offered.",
    )
    expand_max_chars: int = Field(
        20_000,
        ge=1000,
        le=1_000_000,
        description="Characters of an original one expand call returns at most; the model reads the rest by "
        "line ranges.",
    )
    expand_max_calls: int = Field(
        8,
        ge=1,
        le=64,
        description="Expand calls the proxy answers in one round; more in one answer (a model in a loop, or steered "
        "by what it read) are left out of the round, and the same call twice is answered once.",
    )
    expand_max_request_chars: int = Field(
        100_000,
        ge=1000,
        le=10_000_000,
        description="Characters all of one request's expand results may add up to; a call past them is answered "
        "with a tool error. Every result must also fit the model's window, or it is a tool error saying how much "
        "fits.",
    )
    expand_memory_ttl_seconds: int = Field(
        86_400,
        gt=0,
        description="Seconds the expand rounds of a conversation are remembered in the cache at cache_url, to "
        "be shown again in its later requests; each request renews them.",
    )
    # --- The savings ledger (GET /savings, /dashboard), kept in the cache at cache_url ---
    savings_max_models: int = Field(
        50,
        ge=1,
        le=10_000,
        description="Models the savings ledger keeps apart, the first it sees (between every process sharing "
        'cache_url); requests naming any other are counted as model "other": the client picks model names.',
    )
    savings_history_minutes: int = Field(
        24 * 60,
        ge=1,
        le=31 * 24 * 60,
        description="Minutes of the savings ledger's series per minute that are kept (the savings page's chart); "
        "its totals are kept for good.",
    )
    shutdown_grace_seconds: int = Field(
        30, ge=0, description="On SIGTERM, seconds in-flight requests get to finish before they are cut."
    )
    workers: int = Field(
        1, ge=1, description="Worker processes serving the port; each has its own event loop, upstream pool and caches."
    )
    keep_alive_seconds: int = Field(
        75,
        ge=1,
        description="Seconds an idle client connection stays open. Keep it longer than the idle timeout of the "
        "clients and load balancers in front, so that they close idle connections, not the proxy.",
    )
    responses_websocket: Literal["refuse", "relay"] = Field(
        "refuse",
        description="A WebSocket to /v1/responses: refuse answers the upgrade 426, and Codex then sends each request "
        "as an HTTP POST with the whole conversation, which is compacted; relay passes the socket's frames both ways "
        "uncompacted (over a socket a client sends only the new items, so there is nothing to compact).",
    )
    # --- Client connections (app.server.connections), each limit per process ---
    request_head_timeout_seconds: float = Field(
        20.0,
        gt=0,
        description="Seconds a request head (request line and headers) may take to arrive, from the connection's "
        "opening or, on a kept-alive connection, from the first byte of the request; then the connection is closed.",
    )
    max_header_bytes: int = Field(
        64 * 1024, ge=1024, description="Largest request head (request line and headers) accepted (431 above)."
    )
    max_client_connections: int = Field(
        2048,
        ge=1,
        description="Client connections open at once; past it the one that has waited longest for a request is "
        "closed to make room, or the new one gets a 503 if all have requests in flight. Per worker process.",
    )
    request_body_timeout_seconds: float = Field(
        60.0,
        gt=0,
        description="Seconds a request body may go without sending anything before the request is answered 408.",
    )

    @field_validator("api_keys", mode="before")
    @classmethod
    def _key_list(cls, value: Any) -> Any:
        # COMPACTION_API_KEYS="key1,key2"; a JSON list is accepted too, for keys that contain commas.
        if isinstance(value, str):
            text = value.strip()
            try:
                value = json.loads(text) if text.startswith("[") else text.split(",")
            except ValueError:
                raise ValueError("starts with '[' but is not a JSON list of strings") from None
        if isinstance(value, list):
            value = [item.strip() if isinstance(item, str) else item for item in value]
            if any(item == "" for item in value):
                raise ValueError("must not contain an empty key")
        return value

    @field_validator("upstream_base_url", "anthropic_base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")) or len(value.split("://", 1)[1].strip("/")) == 0:
            raise ValueError("must be an http:// or https:// URL with a host")
        return value.rstrip("/")

    @field_validator("summariser_base_url")
    @classmethod
    def _http_url_or_empty(cls, value: str) -> str:
        return cls._http_url(value) if value else value

    @property
    def cache_in_process(self) -> bool:
        """The cache at cache_url lives in this process's memory: using it never waits on I/O."""
        return self.cache_url.startswith("memory:")

    @field_validator("cache_url")
    @classmethod
    def _cache_url(cls, value: str) -> str:
        scheme, sep, rest = value.partition("://")
        if not sep or scheme not in ("memory", "sqlite", "redis", "rediss"):
            raise ValueError("must be memory://, sqlite:///path/to/file.db or redis://host:port/db")
        if scheme == "sqlite" and not rest.strip("/"):
            raise ValueError("sqlite:// needs a file path, e.g. sqlite:///var/lib/compaction-proxy/notes.db")
        return value

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.lower() not in ("debug", "info", "warning", "error", "critical"):
            raise ValueError("must be one of debug, info, warning, error, critical")
        return value.lower()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The file is named by a flag (an init kwarg) or the environment, before the file itself is read.
        init_kwargs: dict[str, Any] = getattr(init_settings, "init_kwargs", {})
        path = init_kwargs.get("config") or os.environ.get("COMPACTION_CONFIG") or None
        return init_settings, env_settings, TomlFileSource(settings_cls, Path(path) if path else None)
