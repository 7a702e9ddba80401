"""A real summariser for bench.notes: a model behind an OpenAI-compatible endpoint."""

from __future__ import annotations

import httpx

from strategies import Message
from strategies.content import text_of
from strategies.notes_io import NotesUnavailable


class ModelSummariser:
    """A real model behind an OpenAI-compatible endpoint, called synchronously (the bench has no event loop)."""

    def __init__(self, base_url: str, model: str, key: str, context_window: int) -> None:
        headers = {"authorization": f"Bearer {key}"}
        self.client = httpx.Client(base_url=base_url.rstrip("/"), timeout=120, headers=headers)
        self.default_model = model
        self.window = context_window

    def context_window(self, model: str) -> int:
        return self.window

    def summarise(self, messages: list[Message], model: str) -> str:
        try:
            response = self.client.post("/chat/completions", json={"model": model, "messages": messages})
        except httpx.TransportError as exc:
            raise NotesUnavailable("summariser_error", type(exc).__name__) from None
        if response.status_code != 200:
            raise NotesUnavailable("summariser_error", f"HTTP {response.status_code}: {response.text[:200]}")
        return text_of(response.json()["choices"][0]["message"]["content"])
