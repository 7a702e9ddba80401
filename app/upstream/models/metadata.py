"""Context windows as upstream servers publish them: `GET /v1/models` metadata (vLLM's `max_model_len`,
OpenRouter's and Together's `context_length`, Groq's `context_window`, LM Studio's `loaded_context_length` /
`max_context_length`), and llama.cpp's `GET /props` (`n_ctx`, at the server's root, beside /v1).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.upstream.models.overflow import MAX_WINDOW, MIN_WINDOW

# A listing is read only this far, and only this many models of it are kept (OpenRouter lists some hundreds).
MAX_LISTING_BYTES = 8 * 1024 * 1024
MAX_LISTED_MODELS = 4096
# In order of preference: the window the server runs with before the one the model was trained for.
_MODEL_KEYS = ("max_model_len", "loaded_context_length", "context_length", "context_window", "max_context_length")
logger = logging.getLogger("compaction_proxy.model_limits")


@dataclass(frozen=True)
class Published:
    """What the upstream published: a window per model id, and (llama.cpp) one for whatever model it serves."""

    windows: dict[str, int] = field(default_factory=dict)
    server_window: int | None = None

    def window(self, model: str) -> int | None:
        return self.windows.get(model, self.server_window)


def _window(value: Any) -> int | None:
    return value if type(value) is int and MIN_WINDOW <= value <= MAX_WINDOW else None


def windows_from_listing(data: Any) -> dict[str, int]:
    """{id: window} from a /v1/models answer ({"data": [{"id": ..., <key>: N}, ...]}); models without one left out."""
    entries = data.get("data") if isinstance(data, dict) else None
    found: dict[str, int] = {}
    for entry in entries[:MAX_LISTED_MODELS] if isinstance(entries, list) else ():
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        top = entry.get("top_provider")  # OpenRouter: the window of the provider it routes to first
        candidates = [entry.get(key) for key in _MODEL_KEYS]
        candidates.append(top.get("context_length") if isinstance(top, dict) else None)
        window = next((w for w in map(_window, candidates) if w is not None), None)
        if window is not None:
            found[entry["id"]] = window
    return found


def window_from_props(data: Any) -> int | None:
    """llama.cpp's /props: `n_ctx` in `default_generation_settings` (or at the top, in some versions)."""
    if not isinstance(data, dict):
        return None
    settings = data.get("default_generation_settings")
    nested = settings.get("n_ctx") if isinstance(settings, dict) else None
    return _window(nested) or _window(data.get("n_ctx"))


def server_root(base_url: str) -> str:
    """http://host:8080/v1 -> http://host:8080: where llama.cpp serves /props."""
    return base_url.removesuffix("/v1")


async def _get_json(client: httpx.AsyncClient, url: str, headers: list[tuple[bytes, bytes]]) -> Any:
    try:
        async with client.stream("GET", url, headers=headers) as response:
            if response.status_code != 200:
                return None
            body = b""
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_LISTING_BYTES:
                    return None
        return json.loads(body)
    except (httpx.HTTPError, ValueError):
        return None


async def discover(client: httpx.AsyncClient, base_url: str, headers: list[tuple[bytes, bytes]]) -> Published | None:
    """What the upstream at base_url publishes, asked with the client's credentials; None when it answered neither."""
    listing = await _get_json(client, f"{base_url}/models", headers)
    props = await _get_json(client, f"{server_root(base_url)}/props", headers)
    if listing is None and props is None:
        return None
    return Published(windows_from_listing(listing), window_from_props(props))
