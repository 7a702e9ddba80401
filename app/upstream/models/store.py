"""What the upstream's answers taught about each model, kept in the cache at `cache_url` (memory:// in this process,
redis:// shared by replicas): the window its context-length errors stated, and the ratio of its prompt token counts
to the proxy's own (calibration).

Keys are per upstream base URL, wire format (whose upstream and counts may differ) and exact model name, hashed:
nothing a client sends under one model name can change what is kept for another. Values come only from the
upstream's answers and are bounded; a process writes at most max_models distinct models, so a client inventing
model names cannot grow the cache without end.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from dataclasses import dataclass

from app.cache import Backend, CacheError
from app.upstream.models.overflow import MAX_WINDOW, MIN_WINDOW

KEY_PREFIX = "limits:"
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
    ratio: float = 1.0  # upstream prompt tokens per counted token
    samples: int = 0

    def encode(self) -> str:
        return json.dumps({"window": self.window, "ratio": self.ratio, "samples": self.samples})

    @classmethod
    def decode(cls, text: str | None) -> Learned:
        try:
            data = json.loads(text) if text else {}
            window, ratio, samples = data.get("window"), data.get("ratio", 1.0), data.get("samples", 0)
        except (ValueError, AttributeError):
            return cls()  # not written by this module
        ok_window = type(window) is int and MIN_WINDOW <= window <= MAX_WINDOW
        ok_ratio = isinstance(ratio, float | int) and MIN_RATIO <= ratio <= MAX_RATIO
        return cls(window if ok_window else None, float(ratio) if ok_ratio else 1.0, samples if ok_ratio else 0)


def clamp_ratio(ratio: float) -> float:
    return min(MAX_RATIO, max(MIN_RATIO, ratio))


class LearnedStore:
    def __init__(self, backend: Backend, upstream: str, max_models: int) -> None:
        self.backend = backend
        self.upstream = upstream
        self.max_models = max_models
        self._written: set[str] = set()
        self._lock = threading.Lock()
        self._full_logged = False

    def key(self, model: str, wire: str) -> str:
        digest = hashlib.sha256(f"{self.upstream}\0{wire}\0{model}".encode()).hexdigest()[:40]
        return KEY_PREFIX + digest

    def get(self, model: str, wire: str) -> Learned:
        """What is known of model; nothing when the cache fails (the request goes on with the defaults)."""
        try:
            return Learned.decode(self.backend.get(self.key(model, wire)))
        except CacheError as exc:
            logger.warning("the learned limits cannot be read from the cache: %s", type(exc).__name__)
            return Learned()

    def learn_window(self, model: str, wire: str, window: int) -> Learned:
        """The upstream said the model's window is `window`; kept when sane, the smaller of two."""
        current = self.get(model, wire)
        if not MIN_WINDOW <= window <= MAX_WINDOW:
            return current
        learned = Learned(min(window, current.window or window), current.ratio, current.samples)
        self._put(model, wire, learned)
        return learned

    def observe(self, model: str, wire: str, counted: int, real: int) -> Learned:
        """The upstream counted `real` prompt tokens where the proxy counted `counted` (uncalibrated)."""
        current = self.get(model, wire)
        if counted < MIN_SAMPLE_TOKENS or real <= 0:
            return current
        sample = clamp_ratio(real / counted)
        weight = 1.0 if current.samples == 0 else SMOOTHING
        ratio = round(current.ratio + weight * (sample - current.ratio), 4)
        if current.samples >= SETTLED_SAMPLES and abs(ratio - current.ratio) < SETTLED_CHANGE:
            return current  # settled: no write per request
        learned = Learned(current.window, ratio, min(current.samples + 1, 1_000_000))
        self._put(model, wire, learned)
        return learned

    def _put(self, model: str, wire: str, learned: Learned) -> None:
        key = self.key(model, wire)
        with self._lock:
            if key not in self._written:
                if len(self._written) >= self.max_models:
                    if not self._full_logged:
                        self._full_logged = True
                        logger.warning("learned limits: %d models already kept; no more are learned", self.max_models)
                    return
                self._written.add(key)
        try:
            self.backend.put(key, learned.encode())
        except CacheError as exc:
            logger.warning("the learned limits cannot be written to the cache: %s", type(exc).__name__)

    def close(self) -> None:
        self.backend.close()
