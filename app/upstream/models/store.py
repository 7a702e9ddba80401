"""What the upstream's answers taught about each model, kept in the cache at `cache_url` (memory:// in this process,
redis:// shared by replicas): the window its context-length errors stated, and the ratio of its prompt token counts
to the proxy's own (calibration).

Keys are per upstream base URL, wire format (whose upstream and counts may differ) and exact model name, hashed:
nothing a client sends under one model name can change what is kept for another. A window is kept apart for
requests that opt into the model's longer window (Anthropic's context-1m beta): a refusal without it says nothing
of the window with it. The ratio is kept per client (app.policy.keys.Keys.client_scope), the MAX_CLIENTS most
recent of a model: what one client sends (fields the upstream ignores, content it counts otherwise) moves its own
calibration only, never another's; a client not seen yet is counted as the tokenizer counts. Values come only
from the upstream's answers and are bounded; a process writes at most max_models distinct models, so a client
inventing model names cannot grow the cache without end.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

from app.cache import Backend, CacheError
from app.upstream.models.overflow import MAX_WINDOW, MIN_WINDOW

KEY_PREFIX = "limits:"
# Clients whose calibration is kept per model: the most recently sampled.
MAX_CLIENTS = 64
# A ratio outside this range is a prompt no tokenizer difference explains (a client's claimed unseen tokens, say).
MIN_RATIO, MAX_RATIO = 0.5, 3.0
# Samples from prompts this small are mostly per-message overhead: too noisy to learn from.
MIN_SAMPLE_TOKENS = 64
# Weight of a new sample in the smoothed ratio (the first sample is taken whole).
SMOOTHING = 0.3
# Once this many samples are in, a change smaller than SETTLED_CHANGE is not written.
SETTLED_SAMPLES, SETTLED_CHANGE = 16, 0.002
logger = logging.getLogger("compaction_proxy.model_limits")


@dataclass(frozen=True)
class Learned:
    window: int | None = None  # the window the upstream's context-length error stated
    ratio: float = 1.0  # upstream prompt tokens per counted token, for this client
    samples: int = 0


@dataclass(frozen=True)
class Ratios:
    """A model's calibration, per client: (ratio, samples) by client, the most recently sampled last."""

    clients: dict[str, tuple[float, int]]

    def encode(self) -> str:
        return json.dumps({"clients": {c: list(v) for c, v in self.clients.items()}})

    @classmethod
    def decode(cls, text: str | None) -> Ratios:
        try:
            data = json.loads(text) if text else {}
            clients = data.get("clients", {}) if isinstance(data, dict) else {}
        except ValueError:
            return cls({})  # not written by this module
        kept: dict[str, tuple[float, int]] = {}
        for client, value in list(clients.items())[-MAX_CLIENTS:] if isinstance(clients, dict) else []:
            ratio, samples = _pair(value)
            if isinstance(client, str) and len(client) <= 64 and MIN_RATIO <= ratio <= MAX_RATIO and samples > 0:
                kept[client] = (float(ratio), samples)
        return cls(kept)

    def with_sample(self, client: str, ratio: float, samples: int) -> Ratios:
        clients = {c: v for c, v in self.clients.items() if c != client}
        clients[client] = (ratio, samples)
        return Ratios(dict(list(clients.items())[-MAX_CLIENTS:]))


def _pair(value: Any) -> tuple[float, int]:
    if isinstance(value, list) and len(value) == 2:
        ratio, samples = value
        if isinstance(ratio, float | int) and type(samples) is int:
            return float(ratio), samples
    return 0.0, 0


def _window(text: str | None) -> int | None:
    try:
        data = json.loads(text) if text else {}
        window = data.get("window") if isinstance(data, dict) else None
    except ValueError:
        return None
    return window if type(window) is int and MIN_WINDOW <= window <= MAX_WINDOW else None


def clamp_ratio(ratio: float) -> float:
    return min(MAX_RATIO, max(MIN_RATIO, ratio))


class LearnedStore:
    def __init__(self, backend: Backend, upstream: str, max_models: int) -> None:
        self.backend = backend
        self.upstream = upstream
        self.max_models = max_models
        self._written: set[str] = set()  # models, by key_of's digest
        self._lock = threading.Lock()
        self._full_logged = False

    def _digest(self, model: str, wire: str) -> str:
        return hashlib.sha256(f"{self.upstream}\0{wire}\0{model}".encode()).hexdigest()[:40]

    def window_key(self, model: str, wire: str, extended: bool = False) -> str:
        return f"{KEY_PREFIX}{self._digest(model, wire)}" + (":1m" if extended else "")

    def ratio_key(self, model: str, wire: str) -> str:
        return f"{KEY_PREFIX}{self._digest(model, wire)}:ratio"

    def get(self, model: str, wire: str, *, extended: bool = False, client: str = "") -> Learned:
        """What is known of model for this client; nothing when the cache fails (the request goes on with the
        defaults).
        """
        try:
            window = _window(self.backend.get(self.window_key(model, wire, extended)))
            ratio, samples = Ratios.decode(self.backend.get(self.ratio_key(model, wire))).clients.get(client, (1.0, 0))
        except CacheError as exc:
            logger.warning("the learned limits cannot be read from the cache: %s", type(exc).__name__)
            return Learned()
        return Learned(window, ratio, samples)

    def learn_window(self, model: str, wire: str, window: int, *, extended: bool = False) -> int | None:
        """The upstream said the model's window is `window`; kept when sane, the smaller of two. The window kept
        (None: none could be), or `window` itself when it cannot be written (the cache failed, or max_models).
        """
        if not MIN_WINDOW <= window <= MAX_WINDOW:
            return self.get(model, wire, extended=extended).window
        key = self.window_key(model, wire, extended)
        try:
            current = _window(self.backend.get(key))
        except CacheError:
            current = None
        kept = min(window, current or window)
        self._put(model, wire, key, json.dumps({"window": kept}))
        return kept

    def observe(self, model: str, wire: str, client: str, counted: int, real: int) -> Learned:
        """The upstream counted `real` prompt tokens where the proxy counted `counted` (uncalibrated), for this
        client.
        """
        key = self.ratio_key(model, wire)
        try:
            ratios = Ratios.decode(self.backend.get(key))
        except CacheError as exc:
            logger.warning("the learned limits cannot be read from the cache: %s", type(exc).__name__)
            return Learned()
        ratio, samples = ratios.clients.get(client, (1.0, 0))
        if counted < MIN_SAMPLE_TOKENS or real <= 0:
            return Learned(None, ratio, samples)
        sample = clamp_ratio(real / counted)
        weight = 1.0 if samples == 0 else SMOOTHING
        new = round(ratio + weight * (sample - ratio), 4)
        if samples >= SETTLED_SAMPLES and abs(new - ratio) < SETTLED_CHANGE:
            return Learned(None, ratio, samples)  # settled: no write per request
        samples = min(samples + 1, 1_000_000)
        self._put(model, wire, key, ratios.with_sample(client, new, samples).encode())
        return Learned(None, new, samples)

    def _put(self, model: str, wire: str, key: str, value: str) -> None:
        name = self._digest(model, wire)
        with self._lock:
            if name not in self._written:
                if len(self._written) >= self.max_models:
                    if not self._full_logged:
                        self._full_logged = True
                        logger.warning("learned limits: %d models already kept; no more are learned", self.max_models)
                    return
                self._written.add(name)
        try:
            self.backend.put(key, value)
        except CacheError as exc:
            logger.warning("the learned limits cannot be written to the cache: %s", type(exc).__name__)

    def close(self) -> None:
        self.backend.close()
